"""The shop's Django tasks (on whatever TASKS["default"] is)."""

from __future__ import annotations

import asyncio
from typing import Any

from alkstore.contrib.django.compat import TaskContext
from tests.django_backend.project.shop.models import Order

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


class PaymentDeclined(Exception):
    pass


@task()
def ship(order_id: int, database: str) -> dict[str, Any]:
    """Reads the committed order, marks it shipped: the worker sees the view's rows."""
    order = Order.objects.using(database).get(id=order_id)
    order.shipped = True
    order.save(using=database)
    return {"order": order.id, "item": order.item}


@task()
def charge(amount: int) -> None:
    raise PaymentDeclined(f"card declined for {amount}")


@task(takes_context=True)
def which_attempt(context: TaskContext, label: str) -> dict[str, Any]:
    return {"label": label, "attempt": context.attempt, "id": context.task_result.id}


@task()
async def add_slowly(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b
