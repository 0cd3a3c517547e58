"""Public names of a package loaded on first use (PEP 562), and Dask arrays without pydata sparse.

A package whose ``__init__`` imported every module would make whoever imports
one of its modules pay for all of them — a Dask worker unpickling one block
function, or ``dsvm --help``.

``import dask.array`` imports pydata ``sparse`` whenever it is installed
(``dask/array/chunk_types.py`` registers ``sparse.SparseArray`` as a chunk
type at import), and ``sparse`` imports numba and llvmlite: the largest import
of every command and every worker once an extra such as dask-ml (through
dask-glm) has installed them, though dsvm uses neither.  :func:`defer_sparse_chunk_type` makes
that one registration lazy: Dask gets a stand-in class that matches
``sparse.SparseArray`` and its subclasses once someone imports ``sparse``, and
``sparse`` is imported when someone asks for it, not before.
"""

from __future__ import annotations

import abc
import importlib
import importlib.abc
import inspect
import sys
from collections.abc import Callable

_CHUNK_TYPES = "dask.array.chunk_types"


def lazy_names(package: str, modules: dict[str, tuple[str, ...]], namespace: dict,
               subpackages: tuple[str, ...] = ()) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for a package that exports ``modules``' names (module, relative to
    ``package`` or absolute, -> the names it defines); a name is imported on first use and kept in
    ``namespace``.  ``subpackages`` are imported when first named as attributes (``dsvm.svm``)."""
    owner = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str):
        if name in subpackages:
            return importlib.import_module(f"{package}.{name}")
        module = owner.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted([*namespace.get("__all__", owner), *subpackages])

    return __getattr__, __dir__


class SparseChunkType(abc.ABC):  # noqa: B024  (an ABC for its __subclasshook__ alone)
    """pydata sparse's ``SparseArray`` among Dask's chunk types without importing ``sparse``.

    A class is a subclass when ``sparse`` has been imported and the class derives from
    ``sparse.SparseArray``: no sparse array exists before ``sparse`` is imported, so Dask's checks
    (``is_valid_chunk_type``, ``is_valid_array_chunk``) answer as with the class itself.
    """

    @classmethod
    def __subclasshook__(cls, other):
        base = getattr(sys.modules.get("sparse"), "SparseArray", None)
        if isinstance(base, type) and isinstance(other, type) and issubclass(other, base):
            return True
        return NotImplemented


class _DeferSparse(importlib.abc.MetaPathFinder):
    """Answers the first ``import sparse`` once: from Dask's chunk-type registration with the stand-in
    (and ``ModuleNotFoundError``, which that code skips), from anywhere else with the real module."""

    def find_spec(self, name, path=None, target=None):
        if name != "sparse":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        chunk_types = sys.modules.get(_CHUNK_TYPES)
        if chunk_types is None or not _called_from(_CHUNK_TYPES):
            return None
        chunk_types.register_chunk_type(SparseChunkType)
        raise ModuleNotFoundError("dask's eager import of pydata sparse deferred by dsvm (SparseChunkType)",
                                  name="sparse")


def _called_from(module: str) -> bool:
    frame = inspect.currentframe()
    while frame is not None:
        if frame.f_globals.get("__name__") == module:
            return True
        frame = frame.f_back
    return False


def defer_sparse_chunk_type() -> None:
    """Keep ``import dask.array`` from importing pydata ``sparse`` and numba (see the module docstring).

    Does nothing once Dask arrays or ``sparse`` are imported (too late, or nothing to save).
    """
    if _CHUNK_TYPES in sys.modules or "sparse" in sys.modules:
        return
    if not any(isinstance(finder, _DeferSparse) for finder in sys.meta_path):
        sys.meta_path.insert(0, _DeferSparse())
