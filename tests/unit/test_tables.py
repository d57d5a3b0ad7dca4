"""core/tables.py: the copy's neutral rows compare equal across engines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from alkstore.core.tables import COPIED_TABLES, Digest, canonical, micros, table

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@given(st.floats(min_value=-1e10, max_value=1e11, allow_nan=False))
def test_micros_rounds_as_datetime_fromtimestamp_does(seconds: float) -> None:
    shown = datetime.fromtimestamp(seconds, UTC)
    assert micros(seconds) == (shown - _EPOCH) // timedelta(microseconds=1)


def test_every_table_starts_below_any_key_and_names_its_columns_once() -> None:
    for spec in COPIED_TABLES:
        assert len(set(spec.names)) == len(spec.names)
        assert len(spec.start) == spec.key
        assert table(spec.name) is spec


def test_canonical_rows_of_both_engines_digest_the_same() -> None:
    spec = table("alk_queues")
    sqlite_row = ("q", 1, None, None, 10, 1.0, 4, 1_700_000_000.25, 1, 30.0)
    postgres_row = ("q", True, None, None, 10, 1.0, 4, 1_700_000_000.25, True, 30.0)
    a, b = Digest(), Digest()
    a.add(canonical(spec, sqlite_row))
    b.add(canonical(spec, postgres_row))
    assert (a.rows, a.hexdigest()) == (b.rows, b.hexdigest())
    spec = table("alk_outcomes")
    assert canonical(spec, ("q", 1_700_000_040, "success", 3)) == canonical(
        spec, ("q", 1_700_000_040.0, "success", 3)
    )
