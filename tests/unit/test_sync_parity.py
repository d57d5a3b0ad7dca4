"""Every public method and property of the async API has its blocking twin in alkstore.sync."""

from __future__ import annotations

import inspect

import pytest

import alkstore
from alkstore import admin, bulk, job_handle, queue, store, sync, sync_admin, transaction
from alkstore import subscription as asub

# async name -> its blocking twin's name (the rest keep their names)
_RENAMED = {"aclose": "close"}

PAIRS = [
    (store.Store, sync.Store),
    (queue.Queue, sync.Queue),
    (transaction.TxQueue, sync.TxQueue),
    (job_handle.JobHandle, sync.JobHandle),
    (transaction.Transaction, sync.Transaction),
    (asub.Subscription, sync.Subscription),
    (admin.Admin, sync.Admin),
    (bulk.BulkActions, sync_admin.BulkActions),
]


def _public(cls: type) -> set[str]:
    names = {n for n in dir(cls) if not n.startswith("_")}
    names |= {n for n in vars(cls).get("__slots__", ()) if not n.startswith("_")}
    return names


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=lambda c: c.__qualname__)
def test_every_public_name_has_a_blocking_twin(async_cls: type, sync_cls: type) -> None:
    instance_attrs = {"url", "name", "opts", "job", "channels"}
    wanted = {_RENAMED.get(n, n) for n in _public(async_cls)}
    have = _public(sync_cls) | instance_attrs
    assert sorted(wanted - have) == []


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=lambda c: c.__qualname__)
def test_twins_take_the_same_parameters(async_cls: type, sync_cls: type) -> None:
    for name in _public(async_cls):
        amember = getattr(async_cls, name, None)
        smember = getattr(sync_cls, _RENAMED.get(name, name), None)
        if not inspect.isfunction(amember) or not inspect.isfunction(smember):
            continue
        aparams = list(inspect.signature(amember).parameters)
        sparams = list(inspect.signature(smember).parameters)
        assert aparams == sparams, f"{async_cls.__name__}.{name}"


def test_the_module_level_entry_points_match() -> None:
    assert inspect.signature(sync.connect).parameters.keys() == (
        inspect.signature(alkstore.connect).parameters.keys()
    )
