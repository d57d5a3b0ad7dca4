"""Django's tasks framework (``django.tasks``, or the ``django-tasks`` backport on
Python 3.11) on alkstore: ``pip install 'alkstore[django]'``, then (docs/django.md)::

    INSTALLED_APPS = [..., "alkstore.contrib.django"]   # for manage.py alkstore_worker
    TASKS = {"default": {"BACKEND": "alkstore.contrib.django.AlkstoreBackend",
                         "OPTIONS": {"URL": "postgresql://app@db/app"}}}
"""

from alkstore.contrib.django.backend import AlkstoreBackend, InvalidTask

__all__ = ["AlkstoreBackend", "InvalidTask"]
