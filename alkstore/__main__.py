"""``python -m alkstore …``: the same command line as ``alkstore …``."""

from alkstore.cli import main

if __name__ == "__main__":
    main()
