#!/usr/bin/env python
"""The test project's manage.py (``manage.py alkstore_worker`` runs the worker)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_backend.project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
