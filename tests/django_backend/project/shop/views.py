"""``/orders?item=…``: writes an Order and enqueues its shipping in one transaction.

``mode=atomic`` (default) enqueues inside ``atomic()``; ``mode=on_commit`` from
``transaction.on_commit`` (the pattern for a store outside Django's database);
``fail=1`` raises after the enqueue, rolling the transaction back.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import HttpRequest, JsonResponse

from alkstore.contrib.django import InvalidTask
from alkstore.contrib.django.compat import task_backends
from tests.django_backend.project.shop.models import Order
from tests.django_backend.project.shop.tasks import ship


class Rollback(Exception):
    pass


def place_order(request: HttpRequest) -> JsonResponse:
    database = task_backends["default"].database
    mode = request.GET.get("mode", "atomic")
    enqueued: list[Any] = []
    try:
        with transaction.atomic(using=database):
            order = Order.objects.using(database).create(item=request.GET["item"])
            if mode == "on_commit":
                transaction.on_commit(
                    lambda: enqueued.append(ship.enqueue(order.id, database)), using=database
                )
            else:
                enqueued.append(ship.enqueue(order.id, database))
            if request.GET.get("fail"):
                raise Rollback()
    except Rollback:
        ids = [r.id for r in enqueued]
        return JsonResponse({"rolled_back": True, "result_ids": ids}, status=409)
    except InvalidTask as e:
        return JsonResponse({"error": str(e)}, status=400)
    return JsonResponse({"order": order.id, "result_id": enqueued[0].id})
