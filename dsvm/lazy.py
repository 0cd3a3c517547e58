"""Public names of a package loaded on first use (PEP 562).

A package whose ``__init__`` imported every module would make whoever imports
one of its modules pay for all of them — a Dask worker unpickling one block
function, or ``dsvm --help``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_names(package: str, modules: dict[str, tuple[str, ...]], namespace: dict) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for a package that exports ``modules``' names (module, relative to
    ``package``, -> the names it defines); a name is imported on first use and kept in ``namespace``."""
    owner = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str):
        module = owner.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(namespace.get("__all__", owner))

    return __getattr__, __dir__
