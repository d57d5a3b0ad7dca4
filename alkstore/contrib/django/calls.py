"""What a Django task call looks like inside alkstore: the job payload and the kept value.

A job is alkstore's task envelope named by the Django task's module path,
``{"task": "shop.tasks.send_receipt", "args": {"args": [...], "kwargs": {...}}}``,
so the dashboard and ``alkstore jobs show`` name the real task. The kept result
of a successful run holds what a :class:`TaskResult` needs once the job row is
gone: the call, its stamps and the return value.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.utils.module_loading import import_string

from alkstore.errors import PayloadError
from alkstore.tasks import BadCall, decode_call, encode_call

from .compat import Task, TaskError

__all__ = ["call_of", "call_payload", "check_kept", "error_of", "find_django_task", "kept_value"]

# the stand-in class of an error that no exception raised (expired, max attempts, a lapsed claim)
_NO_EXCEPTION = "alkstore.errors.JobDeadError"
_TRACEBACK = "\nTraceback (most recent call last):\n"


def call_payload(task: Task[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> bytes:
    """The job payload of one call; ``PayloadError`` naming the task if it is not JSON."""
    try:
        return encode_call(task.module_path, {"args": list(args), "kwargs": dict(kwargs)})
    except PayloadError as e:
        raise PayloadError(f"Django task {task.module_path!r}: {e}") from e


def find_django_task(path: str) -> Task[Any, Any] | None:
    """The Django task at module path ``path``, or ``None`` if there is none."""
    if not re.fullmatch(r"[A-Za-z_][\w.]*", path):
        return None
    try:
        found = import_string(path)
    except ImportError:
        return None
    return found if isinstance(found, Task) else None


def call_of(payload: bytes) -> tuple[Task[Any, Any], list[Any], dict[str, Any]] | None:
    """``(task, args, kwargs)`` of a job made by the Django backend, else ``None``."""
    try:
        name, arguments = decode_call(payload)
    except BadCall:
        return None
    task = find_django_task(name)
    args, kwargs = arguments.get("args", []), arguments.get("kwargs", {})
    if task is None or not isinstance(args, list) or not isinstance(kwargs, dict):
        return None
    return task, args, kwargs


def kept_value(
    task: Task[Any, Any],
    args: list[Any],
    kwargs: dict[str, Any],
    stamps: Mapping[str, Any],
    value: Any,
) -> dict[str, Any]:
    """The JSON kept as a successful run's result: the call, ``stamps`` and its value."""
    return {"task": task.module_path, "args": args, "kwargs": kwargs, **stamps, "value": value}


def _class_path(name: str, traceback: str) -> str:
    """The exception's module path: the traceback's last line ends ``module.Name: message``."""
    if not name.isidentifier():
        return _NO_EXCEPTION
    found = re.findall(rf"^((?:\w+\.)*){re.escape(name)}(?::|$)", traceback, re.MULTILINE)
    module = found[-1].rstrip(".") if found else ""
    if module:
        return f"{module}.{name}"
    kind = getattr(builtins, name, None)
    if isinstance(kind, type) and issubclass(kind, BaseException):
        return f"builtins.{name}"
    return _NO_EXCEPTION if not found else name


def error_of(text: str) -> TaskError:
    """A Django ``TaskError`` from an alkstore ``last_error`` (``Type: message`` and the
    traceback, or a plain reason such as ``expired``)."""
    head = text.split("\n", 1)[0]
    name = head.split(":", 1)[0].strip()
    # the message may span lines: the traceback starts at its first "Traceback" line
    start = text.find(_TRACEBACK)
    traceback = text[start + 1 :] if start >= 0 else text.partition("\n")[2]
    return TaskError(exception_class_path=_class_path(name, traceback), traceback=traceback or head)


def check_kept(value: object) -> dict[str, Any] | None:
    """A kept value as written by :func:`kept_value`, or ``None`` if it is not one."""
    if not isinstance(value, dict) or not {"task", "args", "kwargs", "value"} <= value.keys():
        return None
    return value
