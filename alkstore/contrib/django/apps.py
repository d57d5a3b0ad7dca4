"""The Django app that brings ``manage.py alkstore_worker``."""

from __future__ import annotations

from django.apps import AppConfig


class AlkstoreConfig(AppConfig):
    """``"alkstore.contrib.django"`` in ``INSTALLED_APPS``."""

    name = "alkstore.contrib.django"
    label = "alkstore"
    verbose_name = "alkstore"
