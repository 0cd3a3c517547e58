"""How many BLAS threads the numpy kernels of dsvm use.

OpenBLAS parallelises every call, which does not pay for the small and
memory-bound calls of dsvm: measured here (2 cores), a GEMV on an 8192 x 384
block takes 1.1 ms on one thread and 4.6 ms on two, a Cholesky of a 501 x 501
matrix 2.8 ms against 5.2 ms, its eigendecomposition 38 ms against 102 ms;
from about k = 1000 on, two threads win (1001: 14.6 against 21.2 ms).
Block-parallel code runs its blocks on several threads with one BLAS thread
each; the client's small dense factorisations pick by size.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

SMALL_DENSE = 800  # below this order a factorisation runs on one BLAS thread

_CONTROLLER = None


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """BLAS on one thread inside the block (process-wide: OpenBLAS has one setting)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    with _CONTROLLER.limit(limits=1, user_api="blas"):
        yield


def blas_for_order(n: int) -> contextlib.AbstractContextManager:
    """One BLAS thread for a dense factorisation of order ``n`` below :data:`SMALL_DENSE`."""
    return single_threaded_blas() if n < SMALL_DENSE else contextlib.nullcontext()
