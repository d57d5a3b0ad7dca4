"""Tasks: a function registered on an App, deferred as a JSON job of its queue.

A job made by a task carries ``{"task": name, "args": {...}}``: the task's
name (so one queue can carry several tasks) and its arguments bound to the
function's signature by name. Binding happens at ``defer``, so a wrong call
fails in the producer (``TypeError``) and an argument JSON cannot encode
fails there too (``PayloadError``), before anything is written.

The producer side: it lives beside the store, not in ``worker/`` (the worker
imports it; a producer never imports the worker). ``alkstore.worker``
re-exports ``Fail``, ``Task`` and ``TaskCall``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, Self, TypeVar

from alkstore.calls import BadCall, decode_call, decode_envelope, encode_call
from alkstore.core.life import Progress
from alkstore.core.options import EnqueueOpts, QueueOpts, check_non_negative, describe
from alkstore.errors import InvalidArgumentError
from alkstore.tracing import create_span, recording
from alkstore.transaction import Transaction

if TYPE_CHECKING:
    from alkstore.queue import Queue
    from alkstore.store import Store
    from alkstore.sync import Store as SyncStore
    from alkstore.workflows import Sig

__all__ = [
    "BadCall",
    "Deferred",
    "SyncDeferred",
    "Fail",
    "TaskApp",
    "Snooze",
    "Task",
    "TaskCall",
    "decode_call",
    "decode_envelope",
    "encode_call",
]

P = ParamSpec("P")
R = TypeVar("R")


class TaskApp(Protocol):
    """What a task needs of the :class:`~alkstore.App` it is registered on: its store,
    async and blocking (so this module never imports ``alkstore.app``)."""

    async def connect(self) -> Store:
        """The app's store, opened in this event loop."""
        ...

    def sync_store(self) -> SyncStore:
        """The app's blocking store."""
        ...


class Fail(Exception):
    """Raise in a task to dead-letter its job at once, with this message as ``last_error``."""


class Snooze(Exception):
    """Raise in a task to put its job back to pending for ``delay_s`` seconds without
    spending an attempt.

    >>> @app.task(queue="q")
    ... async def poll_export(export_id: int) -> None:
    ...     if not await ready(export_id):
    ...         raise alkstore.Snooze(30)
    """

    def __init__(self, delay_s: float = 0.0) -> None:
        super().__init__(f"snoozed for {delay_s}s")
        self.delay_s = check_non_negative("delay_s", delay_s)


class _KeywordPlan:
    """A task's precomputed call plan when every parameter can be passed by keyword
    (no positional-only, no ``*args`` / ``**kwargs``): a call is ``fn(**arguments)``
    once the names are checked, so no Signature is bound per job."""

    __slots__ = ("names", "order", "required")

    def __init__(
        self, names: frozenset[str], required: frozenset[str], order: tuple[str, ...]
    ) -> None:
        self.names = names
        self.required = required
        self.order = order  # parameter order: a payload's arguments are written in it

    @classmethod
    def of(cls, signature: inspect.Signature) -> _KeywordPlan | None:
        params = signature.parameters.values()
        keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        if any(p.kind not in keyword for p in params):
            return None
        order = tuple(p.name for p in params)
        required = frozenset(p.name for p in params if p.default is inspect.Parameter.empty)
        return cls(frozenset(order), required, order)

    def bound(self, task: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """A keyword call's arguments in parameter order, as ``Signature.bind`` gives
        them (``TypeError`` naming the first unknown or missing one)."""
        keys = kwargs.keys()
        if not keys <= self.names:
            unknown = next(k for k in kwargs if k not in self.names)
            raise TypeError(f"task {task!r}: got an unexpected keyword argument {unknown!r}")
        if not self.required <= keys:
            missing = next(n for n in self.order if n in self.required and n not in kwargs)
            raise TypeError(f"task {task!r}: missing a required argument: {missing!r}")
        if len(keys) == len(self.order):
            return {name: kwargs[name] for name in self.order}
        return {name: kwargs[name] for name in self.order if name in kwargs}

    def kwargs(self, task: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        keys = arguments.keys()
        if not keys <= self.names:
            unknown = sorted(keys - self.names)
            raise BadCall(f"task {task!r} has no parameter(s) {unknown}")
        if not self.required <= keys:
            missing = sorted(self.required - keys)
            raise BadCall(f"task {task!r}: missing a required argument: {missing[0]!r}")
        return dict(arguments)


class _Call(int):
    """A deferred job's id (it *is* that ``int``), plus what the defer learnt."""

    duplicate: bool
    task: Task[Any, Any]

    def __new__(cls, job_id: int, task: Task[Any, Any], duplicate: bool = False) -> Self:
        obj = super().__new__(cls, job_id)
        obj.task = task
        obj.duplicate = duplicate
        return obj

    @property
    def id(self) -> int:
        """The job id as a plain ``int``."""
        return int(self)

    def _check(self) -> Task[Any, Any]:
        task = self.task
        if task.keep_result_s is None:
            raise InvalidArgumentError(
                f"task {task.name!r} keeps no results: register it with keep_result_s=..."
            )
        return task

    def __str__(self) -> str:
        return int.__repr__(self)  # str(call) is the id, as for an int

    def __repr__(self) -> str:
        kind = type(self).__name__
        return f"{kind}({int(self)}, task={self.task.name!r}, duplicate={self.duplicate})"


class Deferred(_Call):
    """The id of a deferred job (it *is* that ``int``), plus what the defer learnt.

    ``duplicate`` says a live job (or the window) already held the call's dedupe
    key, so nothing was written and this is that job's id. ``await
    call.result(timeout_s=10)`` waits for the return value of a task registered
    with ``keep_result_s``.
    """

    async def result(self, timeout_s: float = 10.0) -> Any:
        """The task's return value: waits until the job succeeds; ``JobDeadError`` (with
        the last error) if it died, ``ResultTimeoutError`` after ``timeout_s``."""
        task = self._check()
        store = await task.app.connect()
        return await store.queue(task.queue, task.opts).result(int(self), timeout_s)

    async def progress(self) -> Progress | None:
        """The latest progress the job's handler reported (``current_job().progress``),
        readable while you wait for :meth:`result`."""
        store = await self.task.app.connect()
        return await store.queue(self.task.queue, self.task.opts).progress(int(self))


class SyncDeferred(_Call):
    """What ``defer_sync`` returns: a :class:`Deferred` whose ``result`` blocks.

    The job id (an ``int``), ``duplicate``, and ``call.result(timeout_s=10)``,
    which blocks (through the app's sync store) until the job succeeds.
    """

    def result(self, timeout_s: float = 10.0) -> Any:
        """The task's return value, blocking; the same errors as :meth:`Deferred.result`."""
        task = self._check()
        queue = task.app.sync_store().queue(task.queue, task.opts)
        return queue.result(int(self), timeout_s)

    def progress(self) -> Progress | None:
        """The latest progress the job's handler reported (blocking read)."""
        return self.task.app.sync_store().queue(self.task.queue, self.task.opts).progress(int(self))


class Task(Generic[P, R]):
    """A function registered with ``@app.task``; call it directly, or ``defer`` it as a job.

    >>> @app.task(queue="emails", max_attempts=3)
    ... async def send(to: str) -> None: ...
    >>> job_id = await send.defer(to="a@example.com")
    >>> await send.configure(delay_s=60, priority=5).defer(to="b@example.com")
    """

    def __init__(
        self,
        app: TaskApp,
        fn: Callable[P, R],
        *,
        name: str,
        queue: str,
        opts: QueueOpts,
        timeout_s: float | None,
        fail_on: tuple[type[BaseException], ...],
        keep_result_s: float | None = None,
        batch_size: int | None = None,
        batch_wait_s: float = 0.05,
    ) -> None:
        self.app = app
        # a batch task's handler takes a list of BatchItem (``alkstore.worker.batches``)
        self.batch_size = batch_size
        self.batch_wait_s = batch_wait_s
        self.keep_result_s = keep_result_s
        self.fn = fn
        self.name = name
        self.queue = queue
        self.opts = opts
        self.timeout_s = timeout_s
        self.fail_on = fail_on
        self.signature = inspect.signature(fn)
        self._plan = _KeywordPlan.of(self.signature)
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004  # an object with an async __call__
        )
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self._home: tuple[Store, str, QueueOpts, Queue] | None = None  # see _queue_in

    def _queue_in(self, store: Store) -> Queue:
        """``store.queue(self.queue, self.opts)``, kept for the next plain ``defer()``
        while the store, queue and opts stay the same (a handle is immutable; the
        store's open check comes again at the enqueue)."""
        held = self._home
        if held is not None and held[0] is store and held[1] is self.queue and held[2] is self.opts:
            return held[3]
        queue = store.queue(self.queue, self.opts)
        self._home = (store, self.queue, self.opts, queue)
        return queue

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function here and now (no job)."""
        return self.fn(*args, **kwargs)

    # -- arguments ---------------------------------------------------------------
    def bind(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The call's arguments by parameter name (``TypeError`` if they don't fit)."""
        if self.batch_size is not None:  # the handler takes a list: a call is its keywords
            if args:
                raise TypeError(f"batch task {self.name!r} takes keyword arguments only")
            return dict(kwargs)
        if not args and self._plan is not None:  # keywords only: no Signature bound
            return self._plan.bound(self.name, kwargs)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"task {self.name!r}: {e}") from None
        return dict(bound.arguments)

    def payload(self, *args: Any, **kwargs: Any) -> bytes:
        """The job payload of one call (validated and encoded, nothing written)."""
        return encode_call(self.name, self.bind(*args, **kwargs))

    def _traced_payload(self, trace: Mapping[str, str] | None, *args: Any, **kwargs: Any) -> bytes:
        return encode_call(self.name, self.bind(*args, **kwargs), trace)

    def call_arguments(self, arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments for ``fn`` from a decoded ``args`` object."""
        if self.batch_size is not None:
            return [], dict(arguments)
        plan = self._plan
        if plan is not None:  # the common signature: checked by set arithmetic, no binding
            return [], plan.kwargs(self.name, arguments)
        params = self.signature.parameters
        unknown = set(arguments) - set(params)
        if unknown:
            raise BadCall(f"task {self.name!r} has no parameter(s) {sorted(unknown)}")
        ordered: dict[str, Any] = {}
        for name, param in params.items():
            if name in arguments:
                value = arguments[name]
                if param.kind is param.VAR_POSITIONAL and not isinstance(value, list | tuple):
                    raise BadCall(
                        f"task {self.name!r}: *{name} must be a list, got {describe(value)}"
                    )
                if param.kind is param.VAR_KEYWORD and not isinstance(value, dict):
                    raise BadCall(
                        f"task {self.name!r}: **{name} must be an object, got {describe(value)}"
                    )
                ordered[name] = value
        bound = inspect.BoundArguments(self.signature, ordered)
        args, kwargs = list(bound.args), dict(bound.kwargs)
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise BadCall(f"task {self.name!r}: {e}") from None
        return args, kwargs

    def s(self, *args: Any, **kwargs: Any) -> Sig:
        """This call as a step of a workflow (``alkstore.workflows``: chain, group, chord)."""
        from alkstore.workflows import Sig  # the canvas stands on the tasks, not under them

        self.bind(*args, **kwargs)  # a call that does not fit fails here, not in a worker
        return Sig(self, args, dict(kwargs))

    # -- deferring ---------------------------------------------------------------
    async def defer(self, *args: P.args, **kwargs: P.kwargs) -> Deferred:
        """Enqueue one call as a job of the task's queue; returns the job id (a
        :class:`Deferred`: ``await call.result()`` for a task that keeps results)."""
        return await TaskCall(self, None).defer(*args, **kwargs)

    async def defer_in(self, tx: Transaction, *args: P.args, **kwargs: P.kwargs) -> Deferred:
        """Enqueue one call inside ``tx`` (invisible until commit, gone on rollback)."""
        return await TaskCall(self, None).defer_in(tx, *args, **kwargs)

    def defer_sync(self, *args: P.args, **kwargs: P.kwargs) -> SyncDeferred:
        """Enqueue one call, blocking (Flask, Django views, scripts, any thread); no event
        loop needed from the caller. Returns the job id (a :class:`SyncDeferred`)."""
        return TaskCall(self, None).defer_sync(*args, **kwargs)

    async def defer_many(self, calls: Iterable[Mapping[str, Any]]) -> list[int]:
        """Enqueue many calls (keyword arguments each) in one transaction, with one wake."""
        return await TaskCall(self, None).defer_many(calls)

    def configure(
        self,
        *,
        delay_s: float | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
        expires_in_s: float | None = None,
        max_attempts: int | None = None,
        dedupe_key: str | None = None,
        dedupe_window_s: float | None = None,
        after: Iterable[int] | None = None,
        after_policy: str | None = None,
        partition_key: str | None = None,
        debounce_key: str | None = None,
        debounce_s: float | None = None,
    ) -> TaskCall[P, R]:
        """Per-call options: ``task.configure(delay_s=30).defer(...)``;
        ``configure(dedupe_key="order-42")`` makes a second defer of a live key a no-op
        that returns the first job's id (``call.duplicate`` is then True);
        ``configure(after=[id, ...])`` makes the job wait for those jobs (see
        ``EnqueueOpts.after``; ``alkstore.workflows`` builds whole graphs);
        ``configure(partition_key="acme")`` puts the job under a key for a fair queue
        and per-key limits; ``configure(debounce_key="doc-7", debounce_s=5)`` keeps
        one pending job per key with the latest arguments (``call.duplicate`` is True
        when it replaced one). Each is the ``EnqueueOpts`` field of the same name."""
        opts = EnqueueOpts(
            priority=priority,
            delay_s=delay_s,
            run_at=run_at,
            expires_in_s=expires_in_s,
            max_attempts=max_attempts,
            dedupe_key=dedupe_key,
            dedupe_window_s=dedupe_window_s,
            after=None if after is None else tuple(after),
            after_policy=after_policy,
            partition_key=partition_key,
            debounce_key=debounce_key,
            debounce_s=debounce_s,
        )
        return TaskCall(self, opts)

    def __repr__(self) -> str:
        return f"<alkstore.Task {describe(self.name)} queue={describe(self.queue)}>"


class TaskCall(Generic[P, R]):
    """A task with per-call enqueue options, from :meth:`Task.configure`."""

    __slots__ = ("opts", "task")

    def __init__(self, task: Task[P, R], opts: EnqueueOpts | None) -> None:
        self.task = task
        self.opts = opts

    async def defer(self, *args: P.args, **kwargs: P.kwargs) -> Deferred:
        """Enqueue one call; returns the job id (a :class:`Deferred`)."""
        task = self.task
        if self.opts is None and not recording():  # the plain call: no span, one insert
            payload = encode_call(task.name, task.bind(*args, **kwargs))
            store = await task.app.connect()
            return Deferred(await task._queue_in(store).enqueue(payload), task)
        with create_span(task.queue) as trace:
            payload = task._traced_payload(trace, *args, **kwargs)
            store = await task.app.connect()
            got = await store.queue(task.queue, task.opts).enqueue_unique(payload, self.opts)
        return Deferred(got.id, task, got.duplicate)

    def defer_sync(self, *args: P.args, **kwargs: P.kwargs) -> SyncDeferred:
        """Enqueue one call, blocking, through the app's :meth:`~alkstore.App.sync_store`;
        the job id (a :class:`SyncDeferred`: ``.duplicate``, a blocking ``.result()``)."""
        task = self.task
        payload = task.payload(*args, **kwargs)
        queue = task.app.sync_store().queue(task.queue, task.opts)
        got = queue.enqueue_unique(payload, self.opts)
        return SyncDeferred(got.id, task, got.duplicate)

    async def defer_in(self, tx: Transaction, *args: P.args, **kwargs: P.kwargs) -> Deferred:
        """Enqueue one call inside the transaction ``tx``."""
        if not isinstance(tx, Transaction):
            raise InvalidArgumentError(
                f"defer_in needs an alkstore.Transaction, got {describe(tx)}"
            )
        task = self.task
        with create_span(task.queue) as trace:
            payload = task._traced_payload(trace, *args, **kwargs)
            got = await tx.queue(task.queue, task.opts).enqueue_unique(payload, self.opts)
        return Deferred(got.id, task, got.duplicate)

    async def defer_many(self, calls: Iterable[Mapping[str, Any]]) -> list[int]:
        """Enqueue many calls in one transaction and one round trip."""
        task = self.task
        if isinstance(calls, Mapping | str | bytes):
            raise InvalidArgumentError("defer_many takes a list of keyword-argument mappings")
        calls = list(calls)
        with create_span(task.queue, len(calls)) as trace:
            payloads = [task._traced_payload(trace, **call) for call in calls]
            store = await task.app.connect()
            return await store.queue(task.queue, task.opts).enqueue_many(payloads, self.opts)
