"""Payload encoding (core/payload.py): bytes verbatim, str as UTF-8, else compact JSON."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alkstore.core.payload import NOTIFY_PAYLOAD_MAX_BYTES, encode_notify_payload, encode_payload
from alkstore.errors import PayloadError

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


@given(st.binary())
def test_bytes_are_stored_verbatim(data: bytes) -> None:
    assert encode_payload(data) == data
    assert encode_payload(bytearray(data)) == data
    assert encode_payload(memoryview(data)) == data


def test_bytes_like_results_are_bytes() -> None:
    assert type(encode_payload(bytearray(b"ab"))) is bytes
    assert type(encode_payload(memoryview(b"ab"))) is bytes


@given(st.text().filter(_utf8))
def test_str_is_utf8(text: str) -> None:
    assert encode_payload(text) == text.encode("utf-8")


@given(json_values.filter(lambda v: not isinstance(v, str)))
def test_json_round_trips(value: Any) -> None:
    data = encode_payload(value)
    assert json.loads(data) == value


def test_json_is_compact_utf8() -> None:
    assert encode_payload({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'.encode()
    assert encode_payload([1, None, True]) == b"[1,null,true]"
    assert encode_payload(3) == b"3"
    assert encode_payload(None) == b"null"


@pytest.mark.parametrize(
    "value",
    [
        object(),
        {1, 2},
        Decimal("1.5"),
        math.nan,
        math.inf,
        [math.inf],
        {"k": b"bytes inside json"},
        {(1, 2): "tuple key"},
        "\ud800",
        ["\udfff"],
    ],
)
def test_unencodable_values_raise_payload_error(value: object) -> None:
    with pytest.raises(PayloadError) as e:
        encode_payload(value)
    assert type(value).__name__ in str(e.value) or repr(value)[:20] in str(e.value)


def test_deep_recursion_is_a_payload_error() -> None:
    nested: list[Any] = []
    for _ in range(100_000):
        nested = [nested]
    with pytest.raises(PayloadError):
        encode_payload(nested)


def test_circular_structures_are_a_payload_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(PayloadError):
        encode_payload(loop)


@given(st.text(max_size=200).filter(lambda s: _utf8(s) and "\x00" not in s))
def test_notify_payloads_pass_through(text: str) -> None:
    assert encode_notify_payload(text) == text


def test_notify_payload_limit_is_under_8000_bytes() -> None:
    assert NOTIFY_PAYLOAD_MAX_BYTES == 7999
    assert encode_notify_payload("x" * 7999) == "x" * 7999
    with pytest.raises(PayloadError, match="8000"):
        encode_notify_payload("x" * 8000)
    # the limit counts UTF-8 bytes, not characters
    with pytest.raises(PayloadError):
        encode_notify_payload("é" * 4000)


@pytest.mark.parametrize("payload", [b"bytes", 1, None, "\ud800", "nul\x00"])
def test_bad_notify_payloads_raise_payload_error(payload: object) -> None:
    with pytest.raises(PayloadError):
        encode_notify_payload(payload)
