"""Settings of the test project; the test fixtures pass the databases and TASKS by env.

``SHOP_SQLITE``: the SQLite file of the ``default`` database; ``SHOP_PG_URL``: a
PostgreSQL database for the ``pg`` alias; ``SHOP_TASKS``: TASKS as JSON (the
worker subprocess gets the test's own); ``SHOP_SIGNAL_LOG``: where the shop's
signal receivers append what they saw.
"""

from __future__ import annotations

import json
import os
from urllib.parse import unquote, urlsplit

SECRET_KEY = "alkstore-tests-only"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "tests.django_backend.project.urls"
MIDDLEWARE: list[str] = []
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "alkstore.contrib.django",
    "tests.django_backend.project.shop",
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_SQLITE", ":memory:"),
    }
}
if os.environ.get("SHOP_PG_URL"):
    _pg = urlsplit(os.environ["SHOP_PG_URL"])
    DATABASES["pg"] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _pg.path.lstrip("/"),
        "USER": unquote(_pg.username or ""),
        "PASSWORD": unquote(_pg.password or ""),
        "HOST": _pg.hostname or "",
        "PORT": str(_pg.port or ""),
    }

TASKS = json.loads(
    os.environ.get("SHOP_TASKS")
    or json.dumps(
        {
            "default": {
                "BACKEND": "alkstore.contrib.django.AlkstoreBackend",
                "QUEUES": ["default", "low"],
                "OPTIONS": {"URL": "sqlite:///never-opened.db"},
            }
        }
    )
)
