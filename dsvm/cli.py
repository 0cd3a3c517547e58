"""``python -m dsvm.cli``: the ``dsvm`` command under its earlier module name (see :mod:`dsvm.app.cli`)."""

import sys

from .app.cli import main

__all__ = ["main"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
