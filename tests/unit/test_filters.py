"""The filter language (core/filters.py) and bulk requests (core/bulk.py): parsing, no database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from alkstore.core.bulk import ACTION_STATES, BulkRequest
from alkstore.core.filters import (
    LIVE_STATES,
    SEARCH_STATES,
    ArgTerm,
    JobFilter,
    TimeRange,
    parse_filter,
)
from alkstore.engines.postgres.search import LIVE_STATE_SQL as PG_STATES
from alkstore.engines.sqlite.search import LIVE_STATE_SQL as SQLITE_STATES
from alkstore.errors import InvalidArgumentError

NOW = 1_800_000_000.0


def test_every_engine_compiles_every_live_state_of_the_one_list() -> None:
    assert set(PG_STATES) == set(SQLITE_STATES) == set(LIVE_STATES)
    for states in ACTION_STATES.values():
        assert set(states) <= set(SEARCH_STATES)


def test_terms_parse_into_one_value() -> None:
    f = parse_filter(
        "queue:a,b task:send state:dead,pending args.to=x@y payload.n=7 args.tags~vip "
        "'error:smtp timeout' worker:w-1 created>-1h created<2027-01-15T08:00Z died>-7d",
        now=NOW,
    )
    assert f.queues == ("a", "b")
    assert f.tasks == ("send",)
    assert f.states == ("pending", "dead")  # in the one list's order
    assert f.args == (
        ArgTerm(("args", "to"), "eq", "x@y"),
        ArgTerm(("n",), "eq", 7),
        ArgTerm(("args", "tags"), "contains", "vip"),
    )
    assert f.error == "smtp timeout" and f.worker == "w-1"
    until = datetime(2027, 1, 15, 8, tzinfo=UTC).timestamp()
    created = TimeRange("created", NOW - 3600, until)
    assert f.times == (created, TimeRange("died", NOW - 7 * 86400, None))


def test_terms_split_by_a_shell_are_the_same_filter() -> None:
    text = "queue:a 'error:two words' args.n=1"
    assert parse_filter(["queue:a", "error:two words", "args.n=1"], NOW) == parse_filter(text, NOW)


@pytest.mark.parametrize(
    "text",
    [
        "queue:a",
        "state:processing task:a,b",
        "'args.to=x y' args.n=1.5 args.s='\"7\"' args.b=true args.z=null",
        "payload.k~vip 'error:it broke' worker:w",
        "created>-2h run_at<2026-01-01T00:00Z died>-1d",
    ],
)
def test_text_reads_back_as_the_same_filter(text: str) -> None:
    f = parse_filter(text, NOW)
    assert parse_filter(f.text(), NOW + 999) == f  # absolute times: now no longer matters


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("state:finished", "finished"),
        ("queue:", "queue:"),
        ("shape:round", "shape"),
        ("run_at>soon", "soon"),
        ("args.x={}", "{}"),
        ("args.=1", "args."),
        ("justaword", "justaword"),
        ("x" * 1001, "too long"),
    ],
)
def test_bad_terms_are_named(text: str, named: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        parse_filter(text, NOW)
    assert named in str(e.value)


def test_a_filter_value_is_validated_on_creation() -> None:
    for bad in (
        {"queues": ["a"]},
        {"queues": ("no space",)},
        {"states": ("gone",)},
        {"args": ((("a",), "eq", 1),)},
        {"error": ""},
    ):
        with pytest.raises(InvalidArgumentError):
            JobFilter(**bad)  # type: ignore[arg-type]


def test_terms_and_ranges_are_validated_on_creation() -> None:
    with pytest.raises(InvalidArgumentError):
        ArgTerm((), "eq", 1)
    with pytest.raises(InvalidArgumentError):
        ArgTerm(("a",), "eq", [1])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        TimeRange("created")
    with pytest.raises(InvalidArgumentError):
        TimeRange("updated", 1.0)


def test_a_bulk_action_reaches_only_its_states() -> None:
    every = JobFilter()
    assert BulkRequest("retry", every).reach() == JobFilter(states=("delayed", "dead"))
    assert BulkRequest("retry", every).phases() == ("live", "dead")
    assert BulkRequest("delete", every).phases() == ("dead",)
    assert BulkRequest("cancel", JobFilter(states=("dead",))).reach() is None
    assert BulkRequest("cancel", JobFilter(states=("dead",))).phases() == ()
    died = JobFilter(times=(TimeRange("died", 1.0),))
    assert BulkRequest("move", died, to_queue="b").phases() == ("dead",)


def test_bulk_requests_are_checked() -> None:
    f = JobFilter()
    with pytest.raises(InvalidArgumentError, match="'explode'"):
        BulkRequest("explode", f)
    with pytest.raises(InvalidArgumentError, match="priority"):
        BulkRequest("priority", f)
    with pytest.raises(InvalidArgumentError, match="priority"):
        BulkRequest("priority", f, priority=True)
    with pytest.raises(InvalidArgumentError, match="target queue"):
        BulkRequest("move", f, to_queue="a b")
    with pytest.raises(InvalidArgumentError, match="only for the move"):
        BulkRequest("retry", f, to_queue="b")
