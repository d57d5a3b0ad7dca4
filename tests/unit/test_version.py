"""``alkstore.__version__`` is the installed distribution's version (issue #21)."""

from __future__ import annotations

from importlib import metadata

import alkstore


def test_version_is_the_installed_package_version() -> None:
    assert alkstore.__version__ == metadata.version("alkstore")
    assert "__version__" in alkstore.__all__
