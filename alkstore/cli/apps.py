"""``MODULE:APP``: importing the user's app for the commands that take one (``worker``,
``schedules``, ``enqueue --app``); a failure in the user's module is one line."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from alkstore.app import App
from alkstore.cli.base import BadInput, _debug, _one_line

__all__ = ["load_app"]


def _import_app_module(module_name: str, show_traceback: bool) -> Any:
    """Import ``module_name`` (a dotted name, or a path to a ``.py`` file); any failure
    in the user's module is one line naming it (``--traceback`` for the whole)."""
    path = Path(module_name)
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            if not path.is_file():
                raise BadInput(f"cannot import app module {module_name!r}: no such file")
            directory = str(path.resolve().parent)
            if directory not in sys.path:
                sys.path.insert(0, directory)
            return importlib.import_module(path.stem)
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        return importlib.import_module(module_name)
    except click.ClickException:
        raise
    except BaseException as e:  # SyntaxError, ImportError, or whatever the module raised
        if isinstance(e, KeyboardInterrupt | SystemExit):
            raise
        if show_traceback or _debug():
            traceback.print_exception(e)
        where = ""
        if isinstance(e, SyntaxError) and e.filename:
            where = f" ({e.filename}, line {e.lineno})"
        detail = f"{type(e).__name__}: {_one_line(e)}{where}"
        hint = "" if show_traceback else " (--traceback shows where)"
        raise BadInput(f"cannot import app module {module_name!r}: {detail}{hint}") from None


def load_app(spec: str, *, show_traceback: bool = False) -> App:
    """``module:attribute`` or ``path/to/file.py:attribute`` (attribute defaults to ``app``)
    naming an :class:`App`."""
    module_name, _, attr = spec.rpartition(":") if ":" in spec else (spec, "", "")
    attr = attr or "app"
    if not module_name:
        raise BadInput(f"invalid app {spec!r}: use module:attribute, e.g. myapp:app")
    module = _import_app_module(module_name, show_traceback)
    app = getattr(module, attr, None)
    if not isinstance(app, App):
        found = "nothing" if app is None else type(app).__name__
        raise BadInput(f"{spec!r} is not an alkstore.App (found {found})")
    return app
