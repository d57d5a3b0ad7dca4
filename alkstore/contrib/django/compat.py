"""The one place that picks Django's tasks framework: ``django.tasks`` (Django 6,
Python 3.12+) when present, else the ``django-tasks`` backport (``django_tasks``),
which has the same interface."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 12):  # pragma: no cover - the Python 3.11 venv takes the backport
    try:
        from django.tasks import (
            Task,
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task_backends,
        )
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
        from django.tasks.exceptions import InvalidTask as InvalidTaskError
        from django.tasks.exceptions import TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
    except ImportError:
        from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
        from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started
else:
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started

__all__ = [
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTaskError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
