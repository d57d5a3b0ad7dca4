"""Run a peer-harness script (``alkstore_bench.py``) against another checkout's alkstore.

    $PEERS/venv/bin/python bench/old_launch.py /old/checkout /path/to/alkstore_bench.py ARGS

``bench/old_code.py`` runs a script of this project's ``bench/`` (whose
``common`` it imports); a peer harness's script imports its own ``common``
from its own directory, which this puts first on ``sys.path``.
"""

from __future__ import annotations

import os
import runpy
import sys


def main() -> None:
    root, script, *args = sys.argv[1:]
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path[0:1] = [os.path.dirname(os.path.abspath(script)), root]
    import alkstore

    if not str(alkstore.__file__).startswith(root.rstrip("/") + "/"):
        raise SystemExit(f"alkstore still comes from {alkstore.__file__}")
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
