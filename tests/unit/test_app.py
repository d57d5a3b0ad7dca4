"""App and Task, without a database: the registry and the encoding of task calls."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

import alkstore
from alkstore.app import default_task_name
from alkstore.tasks import BadCall, decode_call, encode_call


def make_app() -> alkstore.App:
    return alkstore.App("sqlite:///unused.db")


def test_task_registers_under_module_and_qualname_by_default() -> None:
    app = make_app()

    @app.task(queue="emails")
    async def send(to: str) -> None: ...

    assert (
        send.name
        == f"{__name__}.test_task_registers_under_module_and_qualname_by_default.<locals>.send"
    )
    assert app.tasks == {send.name: send}
    assert app.queues == ["emails"]
    assert send.is_async


def test_a_bare_task_decorator_registers_with_the_defaults() -> None:
    app = make_app()

    @app.task
    async def send(to: str) -> None: ...

    assert isinstance(send, alkstore.Task)
    assert app.tasks == {send.name: send}
    assert (send.queue, send.opts.max_attempts) == ("default", 5)


def test_a_task_decorator_given_no_function_names_what_it_got() -> None:
    app = make_app()
    with pytest.raises(alkstore.InvalidArgumentError, match="a task must be a function, got 42"):
        app.task(42)  # type: ignore[call-overload]


def test_task_stamps_its_queue_options() -> None:
    app = make_app()

    @app.task(
        queue="q", name="t", max_attempts=3, retry_base_s=2, visibility_timeout_s=5, priority=4
    )
    def t() -> None: ...

    assert (t.opts.max_attempts, t.opts.retry_base_s) == (3, 2)
    assert (t.opts.visibility_timeout_s, t.opts.priority) == (5, 4)
    assert not t.is_async


def test_duplicate_task_names_are_refused() -> None:
    app = make_app()

    @app.task(name="same")
    def a() -> None: ...

    with pytest.raises(alkstore.InvalidArgumentError, match="already registered"):

        @app.task(name="same")
        def b() -> None: ...


@pytest.mark.parametrize(
    "options",
    [
        {"queue": "_reserved"},
        {"queue": "has space"},
        {"max_attempts": 0},
        {"visibility_timeout_s": 0},
        {"timeout_s": -1},
        {"timeout_s": math.nan},
        {"fail_on": (42,)},
        {"name": ""},
    ],
)
def test_bad_task_options_raise_before_registering(options: dict[str, Any]) -> None:
    app = make_app()
    with pytest.raises((alkstore.InvalidNameError, alkstore.InvalidArgumentError)):
        app.task(**options)
    assert app.tasks == {}


def test_task_call_encodes_name_and_arguments_by_parameter_name() -> None:
    app = make_app()

    @app.task(name="send")
    def send(to: str, subject: str = "hi", *, cc: list[str] | None = None) -> None: ...

    payload = send.payload("a@example.com", cc=["b@example.com"])
    assert json.loads(payload) == {
        "task": "send",
        "args": {"to": "a@example.com", "cc": ["b@example.com"]},
    }
    assert payload == encode_call("send", {"to": "a@example.com", "cc": ["b@example.com"]})


def test_call_arguments_round_trip_every_parameter_kind() -> None:
    app = make_app()
    seen: list[Any] = []

    @app.task(name="kinds")
    def kinds(a: int, /, b: int, *rest: int, c: int, **more: int) -> None:
        seen.append((a, b, rest, c, more))

    name, arguments = decode_call(kinds.payload(1, 2, 3, 4, c=5, d=6))
    assert name == "kinds"
    args, kwargs = kinds.call_arguments(arguments)
    kinds.fn(*args, **kwargs)
    assert seen == [(1, 2, (3, 4), 5, {"d": 6})]


def test_a_wrong_call_fails_at_defer_with_type_error() -> None:
    app = make_app()

    @app.task(name="t")
    def t(x: int) -> None: ...

    with pytest.raises(TypeError, match="task 't'"):
        t.payload()
    with pytest.raises(TypeError):
        t.payload(1, 2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"a": 1, "c": 3},
        {"c": 3, "a": 1, "d": 5, "b": 0},
        {"d": 5, "c": 3, "a": 1},
        {"a": 1},
        {"c": 3},
        {"a": 1, "c": 3, "e": 9},
        {},
    ],
)
def test_keyword_calls_bind_without_a_signature_exactly_as_signature_bind(
    kwargs: dict[str, Any],
) -> None:
    """The producer's keyword fast path: same arguments, in parameter order (so the
    same payload bytes), and a TypeError naming the same argument."""
    app = make_app()

    @app.task(name="t")
    def t(a: int, b: int = 2, *, c: int, d: int = 4) -> None: ...

    try:
        expected: Any = dict(t.signature.bind(**kwargs).arguments)
    except TypeError as e:
        expected = e
    if isinstance(expected, TypeError):
        with pytest.raises(TypeError) as got:
            t.bind(**kwargs)
        assert str(got.value) == f"task 't': {expected}"
    else:
        bound = t.bind(**kwargs)
        assert bound == expected and list(bound) == list(expected)
        assert t.payload(**kwargs) == encode_call("t", expected)


@pytest.mark.parametrize("value", [object(), {1, 2}, b"bytes", math.inf, {"k": object()}])
def test_a_non_encodable_argument_fails_with_payload_error(value: Any) -> None:
    app = make_app()

    @app.task(name="t")
    def t(x: Any) -> None: ...

    with pytest.raises(alkstore.PayloadError, match="task 't'"):
        t.payload(x=value)


async def test_defer_with_a_non_encodable_argument_writes_nothing_and_opens_no_store() -> None:
    app = alkstore.App("sqlite:////nonexistent/dir/never.db")

    @app.task(name="t")
    async def t(x: Any) -> None: ...

    with pytest.raises(alkstore.PayloadError):
        await t.defer(x=object())
    with pytest.raises(alkstore.StoreClosedError, match="connect"):
        app.store  # noqa: B018  # never opened


@pytest.mark.parametrize(
    "payload",
    [b"not json", b"[1, 2]", b'{"args": {}}', b'{"task": 3}', b'{"task": "t", "args": [1]}'],
)
def test_decode_call_rejects_what_is_not_a_task_call(payload: bytes) -> None:
    with pytest.raises(BadCall, match="not a task call"):
        decode_call(payload)


@pytest.mark.parametrize(
    "payload",
    [
        b'{"task":"a","args":{},"task":"b"}',  # the last key wins, as in json.loads
        b'{"task":"a","args":[]}',
        b'{"task":"a","args":{} }',
        b'{"task":"a"}',
        b'{"task":"a","args":{"x":1}',
        b'{"task":"\xff","args":{}}',
        b'{"task":"a","args":{"x":1}}x',
        b'{"task":"a\\u0022b","args":{}}',
        b'{"task":"","args":{}}',
        b'{"task":"a","args":',
        b'{"task":"a","args":{"x":1}}}',
        b'{"task":"a","args":{"x":1}}\n',
        encode_call('no"op', {"a": [1, {"x": "}"}]}),
        encode_call("noop", {"seq": 1}, {"traceparent": "00-abc"}),
        encode_call("noop", {"seq": 1, "s": "é"}),
    ],
)
def test_decode_call_reads_every_payload_as_json_loads_does(payload: bytes) -> None:
    # the hot path's reading of encode_call's own shape never differs from the envelope's
    try:
        data = json.loads(payload)
    except ValueError:
        data = None
    args = data.get("args", {}) if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("task"), str)
        or type(args) is not dict
    ):
        with pytest.raises(BadCall):
            decode_call(payload)
        return
    assert decode_call(payload) == (data["task"], args)


def test_call_arguments_reject_unknown_or_missing_parameters() -> None:
    app = make_app()

    @app.task(name="t")
    def t(x: int) -> None: ...

    with pytest.raises(BadCall, match="no parameter"):
        t.call_arguments({"x": 1, "y": 2})
    with pytest.raises(BadCall, match="missing"):
        t.call_arguments({})


def test_configure_validates_enqueue_options() -> None:
    app = make_app()

    @app.task(name="t")
    def t() -> None: ...

    call = t.configure(delay_s=5, priority=2, max_attempts=9)
    assert call.opts == alkstore.EnqueueOpts(priority=2, delay_s=5, max_attempts=9)
    with pytest.raises(alkstore.InvalidArgumentError):
        t.configure(delay_s=-1)


async def test_defer_in_needs_a_transaction() -> None:
    app = make_app()

    @app.task(name="t")
    async def t() -> None: ...

    with pytest.raises(alkstore.InvalidArgumentError, match="Transaction"):
        await t.defer_in("not a tx")  # type: ignore[arg-type]


def test_a_task_is_still_callable_directly() -> None:
    app = make_app()

    @app.task(name="add")
    def add(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5


def test_default_name_of_a_main_script_uses_its_file_name(monkeypatch: Any) -> None:
    import sys
    import types

    main = types.ModuleType("__main__")
    main.__file__ = "/somewhere/myapp.py"
    main.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", main)

    def job() -> None: ...

    job.__module__ = "__main__"
    assert (
        default_task_name(job)
        == "myapp.test_default_name_of_a_main_script_uses_its_file_name.<locals>.job"
    )


def test_worker_options_are_validated() -> None:
    app = make_app()

    @app.task(queue="q", name="t")
    def t() -> None: ...

    with pytest.raises(alkstore.InvalidArgumentError):
        app.worker(concurrency=0)
    with pytest.raises(alkstore.InvalidNameError):
        app.worker(["_bad"])
    with pytest.raises(alkstore.InvalidArgumentError, match="no queues"):
        make_app().worker()
    assert app.worker(concurrency=3).queues == ["q"]
    assert app.worker("other").queues == ["other"]
    for bad in (-1, 1.5, True):
        with pytest.raises(alkstore.InvalidArgumentError, match="attempt_history"):
            app.worker(attempt_history=bad)
    assert app.worker(attempt_history=0).attempt_history == 0


def test_the_keyword_call_plan_agrees_with_signature_binding() -> None:
    app = make_app()
    seen: list[Any] = []

    @app.task(name="kw")
    def kw(a: int, b: int = 2, *, c: int, d: int = 4) -> None:
        seen.append((a, b, c, d))

    assert kw._plan is not None  # the fast path is the one under test
    args, kwargs = kw.call_arguments({"a": 1, "c": 3})
    kw.fn(*args, **kwargs)
    assert seen == [(1, 2, 3, 4)]
    with pytest.raises(BadCall, match=r"no parameter\(s\) \['z'\]"):
        kw.call_arguments({"a": 1, "c": 3, "z": 0})
    with pytest.raises(BadCall, match="missing a required argument: 'c'"):
        kw.call_arguments({"a": 1})
