"""``python -m dsvm``: the ``dsvm`` command (see :mod:`dsvm.app.cli`)."""

import sys

from .app.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
