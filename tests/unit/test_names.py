"""Queue / channel names and worker ids (core/names.py): the one naming rule."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alkstore.core.names import check_name, check_schema, check_worker_id
from alkstore.errors import InvalidArgumentError, InvalidNameError

NAME_CHARS = string.ascii_letters + string.digits + "_.:-"
FIRST_CHARS = NAME_CHARS.replace("_", "")

valid_names = st.builds(
    lambda first, rest: first + rest,
    st.sampled_from(FIRST_CHARS),
    st.text(alphabet=NAME_CHARS, max_size=62),
)


@given(valid_names)
def test_valid_names_are_accepted_unchanged(name: str) -> None:
    assert check_name(name) == name


@given(st.text(alphabet=NAME_CHARS, min_size=64, max_size=200))
def test_names_longer_than_63_bytes_are_rejected(name: str) -> None:
    with pytest.raises(InvalidNameError) as e:
        check_name(name)
    assert repr(name)[:40] in str(e.value)


@given(st.text(alphabet=NAME_CHARS, max_size=62))
def test_names_beginning_with_underscore_are_reserved(rest: str) -> None:
    with pytest.raises(InvalidNameError):
        check_name("_" + rest)


@given(
    valid_names,
    st.characters(blacklist_characters=NAME_CHARS, blacklist_categories=()),
    st.integers(min_value=0, max_value=62),
)
def test_names_with_a_foreign_character_are_rejected(name: str, bad: str, at: int) -> None:
    at = min(at, len(name))
    candidate = (name[:at] + bad + name[at:])[:63]
    if bad not in candidate:  # truncated away
        candidate = bad + candidate[1:]
    with pytest.raises(InvalidNameError) as e:
        check_name(candidate)
    assert repr(candidate) in str(e.value)


@pytest.mark.parametrize(
    "name",
    ["", "_", "_private", "a b", "a/b", "a\n", "\na", "é", "a" * 64, "q;drop", "q'", 'q"'],
)
def test_invalid_names_are_rejected_naming_the_value(name: str) -> None:
    with pytest.raises(InvalidNameError) as e:
        check_name(name)
    assert repr(name) in str(e.value)


@pytest.mark.parametrize("name", [None, 1, b"abc", ["a"]])
def test_non_strings_are_not_names(name: object) -> None:
    with pytest.raises(InvalidNameError):
        check_name(name)


@pytest.mark.parametrize("name", ["a", "A", "0", ".", ":", "-", "a_b", "x" * 63, "a.b:c-d_e"])
def test_boundary_names_are_accepted(name: str) -> None:
    assert check_name(name) == name


def test_invalid_name_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        check_name("")


def test_the_message_says_what_was_checked() -> None:
    with pytest.raises(InvalidNameError, match="channel"):
        check_name("", "channel")


@given(st.text(min_size=1).filter(lambda s: "\x00" not in s and s.isprintable()))
def test_printable_worker_ids_are_accepted(worker_id: str) -> None:
    try:
        worker_id.encode()
    except UnicodeEncodeError:
        return
    assert check_worker_id(worker_id) == worker_id


@pytest.mark.parametrize("worker_id", ["", None, 0, b"w", "\ud800", "a\x00b"])
def test_bad_worker_ids_are_rejected_naming_the_value(worker_id: object) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        check_worker_id(worker_id)
    assert repr(worker_id) in str(e.value)


@pytest.mark.parametrize("schema", ["alkstore", "_x", "t_0123456789ab", "a" * 63])
def test_valid_schemas_are_accepted(schema: str) -> None:
    assert check_schema(schema) == schema


@pytest.mark.parametrize("schema", ["", "A", "1a", "a-b", 'a"b', "a" * 64, None, "pg_jobs", "pg_"])
def test_invalid_schemas_are_rejected(schema: object) -> None:
    with pytest.raises(InvalidNameError):
        check_schema(schema)
