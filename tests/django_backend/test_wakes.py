"""One wake per queue per transaction on the outbox path (issue #21: each enqueue
registered its own after-commit wake, so a block of 1,000 enqueues sent 1,000
NOTIFYs). Counted as a LISTENing connection on the real PostgreSQL receives them."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.django_backend.conftest import Shop


@pytest.mark.parametrize("shop", ["postgres"], indirect=True)
def test_a_block_of_enqueues_wakes_each_queue_once_after_commit(shop: Shop) -> None:
    import psycopg
    from django.db import transaction

    from alkstore.contrib.django.compat import task_backends

    with psycopg.connect(shop.options["URL"], autocommit=True) as listener:
        listener.execute('LISTEN "low"')
        listener.execute('LISTEN "default"')
        with transaction.atomic(using=shop.database):
            for n in range(200):
                shop.tasks.add_slowly.using(queue_name="low").enqueue(n, 1)
                shop.tasks.add_slowly.enqueue(n, 2)
                if n == 100:  # a savepoint rolled back keeps the transaction's wakes
                    try:
                        with transaction.atomic(using=shop.database):
                            shop.tasks.add_slowly.using(queue_name="low").enqueue(n, 3)
                            raise RuntimeError("roll back the savepoint")
                    except RuntimeError:
                        pass
        task_backends["default"].app.close_sync()  # its waker sends what is pending, then stops
        listener.execute("SELECT pg_notify('low', 'end')")  # after every wake: the end of the count
        got: Counter[str] = Counter()
        for note in listener.notifies():
            if note.payload == "end":
                break
            got[note.channel] += 1
    assert got == {"low": 1, "default": 1}


@pytest.mark.parametrize("shop", ["postgres"], indirect=True)
def test_a_wake_rolled_back_with_its_savepoint_is_registered_again(shop: Shop) -> None:
    from django.db import connections, transaction

    with transaction.atomic(using=shop.database):
        with pytest.raises(RuntimeError), transaction.atomic(using=shop.database):
            shop.tasks.add_slowly.using(queue_name="low").enqueue(1, 1)  # its wake: dropped
            raise RuntimeError("roll back the savepoint")
        shop.tasks.add_slowly.using(queue_name="low").enqueue(2, 2)
        callbacks = [entry[1] for entry in connections[shop.database].run_on_commit]
        wakes = [c for c in callbacks if type(c).__name__ == "_Wake"]
        assert [w.queue for w in wakes] == ["low"]
