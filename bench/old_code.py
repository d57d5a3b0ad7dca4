"""Run a benchmark script against another checkout's alkstore (the "before" side).

    .venv/bin/python bench/old_code.py /work/main bench/workflows.py --part plain

``PYTHONPATH=/work/main`` alone does not do it: this venv's editable install
puts a finder on ``sys.meta_path`` that maps ``alkstore`` to this worktree
before any path entry is looked at. This drops that finder, puts the other
checkout first and runs the script (set ``PYTHONDONTWRITEBYTECODE=1`` to leave
that checkout untouched).
"""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    root, script, *args = sys.argv[1:]
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
    sys.path.insert(0, root)
    for name in [m for m in sys.modules if m == "alkstore" or m.startswith("alkstore.")]:
        del sys.modules[name]
    import alkstore

    if not str(alkstore.__file__).startswith(root.rstrip("/") + "/"):
        raise SystemExit(f"alkstore still comes from {alkstore.__file__}")
    print(f"# alkstore from {alkstore.__file__}", flush=True)
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
