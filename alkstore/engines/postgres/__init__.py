"""The PostgreSQL engine (psycopg 3): see ``engine.py`` and docs/postgres.md."""

from alkstore.engines.postgres.engine import SCHEMA_VERSION, PostgresEngine, migrate

__all__ = ["SCHEMA_VERSION", "PostgresEngine", "migrate"]
