"""An app module that sends its own process SIGTERM while it is imported: the worker is
still starting (tests/acceptance/test_worker_network.py)."""

import os
import signal

from tests.acceptance.apps import app

os.kill(os.getpid(), signal.SIGTERM)

__all__ = ["app"]
