"""Margins ``F w + b`` of feature blocks kept from one Newton pass to the next: :class:`MarginCache`.

A Newton pass needs the margins at its current point ``x0`` and at the
trial point ``x1``; ``x0`` is the previous pass's ``x1``, so keeping each
block's margins from one pass to the next saves one of the pass's three
products with ``F`` (the other two, ``F w1`` and the gradient ``Fᵀ g``, are
new).  Values are the same floats a recomputation gives: one cached product
is a slab-by-slab copy of the product the pass would make.  It pays where
``F`` does not fit in the CPU cache (``benchmarks/bench_solve_passes.py``
measures it).

Two places hold the margins:

* in-process blocks: a dict the operator owns (``params["margin_cache"]``),
  keyed by the block object itself, so a block that is not the one cached is
  never served another's margins;
* blocks on Dask workers (``params["margin_cache"] ==`` :data:`IN_PROCESS`):
  a store in each worker process, keyed by the stored block's file
  (:func:`dsvm.blocks.current_block_key`) or, for blocks held in the
  worker's memory, by a weak reference to the block (a block that was
  spilled and reloaded, or recomputed, is a new object: a miss, never a
  wrong answer).  It holds at most :data:`PROCESS_BYTES`, the margins of the
  latest file store only, and drops those of blocks that are gone.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ..blocks import current_block_key

__all__ = ["MarginCache", "IN_PROCESS", "PROCESS_BYTES"]

#: ``params["margin_cache"]`` for blocks on workers: each process keeps the margins of the blocks it works on
IN_PROCESS = "process"
#: the most bytes of margins one worker process keeps
PROCESS_BYTES = 512 * 2**20

_PROCESS_STORE: dict = {}
_PROCESS_LOCK = threading.Lock()


def _entry_bytes(entry) -> int:
    return sum(m.nbytes for m in entry[1].values())


def _keep_in_process(key, owner, margins: dict) -> None:
    """Store one block's margins in this process's store, dropping what is stale or over budget."""
    with _PROCESS_LOCK:
        _PROCESS_STORE.pop(key, None)
        _PROCESS_STORE[key] = (owner, margins)
        folder = key[0] if isinstance(key, tuple) else None
        for other in list(_PROCESS_STORE):
            ref = _PROCESS_STORE[other][0]
            dead = ref is not None and ref() is None
            old_store = folder is not None and isinstance(other, tuple) and other[0] != folder
            if dead or old_store:
                del _PROCESS_STORE[other]
        total = sum(_entry_bytes(e) for e in _PROCESS_STORE.values())
        while total > PROCESS_BYTES and len(_PROCESS_STORE) > 1:
            oldest = next(iter(_PROCESS_STORE))
            total -= _entry_bytes(_PROCESS_STORE.pop(oldest))


class MarginCache:
    """The margins of one block at the last points a solve evaluated (see the module docstring)."""

    KEEP = 2  # the current point and the trial point

    def __init__(self, store: dict | str | None, F):
        """The cache of block ``F`` in ``store`` (``params["margin_cache"]``: the operator's dict,
        :data:`IN_PROCESS`, or None: caching off)."""
        self.store, self.F = store, F
        self.known: dict = {}
        if store is None:
            return
        if store == IN_PROCESS:
            file_key = current_block_key()
            self.key = file_key if file_key is not None else ("block", id(F))
            entry = _PROCESS_STORE.get(self.key)
            if entry is not None and (entry[0] is None or entry[0]() is F):
                self.known = entry[1]
            self.owner = None if file_key is not None else weakref.ref(F)
            return
        entry = store.get(id(F))
        if entry is not None and entry[0] is F:
            self.known = entry[1]

    def get(self, key: bytes | None) -> np.ndarray | None:
        return None if key is None else self.known.get(key)

    def blank(self, n: int) -> np.ndarray | None:
        """An array to fill with new margins, or None when caching is off."""
        return None if self.store is None else np.empty(n)

    def keep(self, margins: dict) -> None:
        """Remember these ``{point key: margins}`` for the block, with the most recent
        of the points remembered before, up to :attr:`KEEP` in all."""
        if self.store is None:
            return
        kept = {k: m for k, m in self.known.items() if k not in margins}
        kept.update((k, m) for k, m in margins.items() if k is not None and m is not None)
        kept = dict(list(kept.items())[-self.KEEP:])
        if self.store == IN_PROCESS:
            _keep_in_process(self.key, self.owner, kept)
        else:
            self.store[id(self.F)] = (self.F, kept)
