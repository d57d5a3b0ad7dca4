"""The shop app: its signal receivers log Django's task signals to ``SHOP_SIGNAL_LOG``."""

from __future__ import annotations

import json
import os
from typing import Any

from django.apps import AppConfig


def _log_signal(signal_name: str) -> Any:
    def receiver(sender: type, task_result: Any, **kwargs: Any) -> None:
        path = os.environ.get("SHOP_SIGNAL_LOG")
        if not path:
            return
        line = {
            "signal": signal_name,
            "sender": sender.__name__,
            "id": task_result.id,
            "task": task_result.task.name,
            "status": str(task_result.status),
            "attempts": task_result.attempts,
            "pid": os.getpid(),
        }
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")

    return receiver


class ShopConfig(AppConfig):
    name = "tests.django_backend.project.shop"
    label = "shop"

    def ready(self) -> None:
        from alkstore.contrib.django.compat import task_enqueued, task_finished, task_started

        for name, signal in (
            ("enqueued", task_enqueued),
            ("started", task_started),
            ("finished", task_finished),
        ):
            signal.connect(_log_signal(name), weak=False, dispatch_uid=f"shop-{name}")
