"""How many BLAS threads the numpy kernels of dsvm use.

OpenBLAS parallelises every call, which does not pay for the small and
memory-bound calls of dsvm: GEMVs on feature blocks and factorisations of
order below about 1000 run slower on several threads than on one, while the
threads wait for memory or for each other.  Block-parallel code runs its
blocks on several threads with one BLAS thread each; the client's dense
factorisations pick by size.

Below order :data:`SMALL_DENSE` (up to 2048) they, and the projection of
an implicit fit's Gram matrix, run on one thread even though an idle
machine would run an eigendecomposition faster on all of them: where another
job shares the cores (worker nodes, SLURM allocations, notebooks) OpenBLAS's
threads wait for each other and the same call takes many times longer
(figures on the documentation's performance page).  The choice is by order
alone, never by the load seen at the time, so that a model's rounding does
not depend on its neighbours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from threadpoolctl import ThreadpoolController

__all__ = ["SMALL_DENSE", "single_threaded_blas", "blas_for_order"]

SMALL_DENSE = 2049  # below this order a factorisation runs on one BLAS thread (module docstring)

_CONTROLLER = None


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """BLAS on one thread inside the block (process-wide: OpenBLAS has one setting)."""
    global _CONTROLLER
    if _CONTROLLER is None:  # made on first use: it inspects every loaded BLAS library
        _CONTROLLER = ThreadpoolController()
    with _CONTROLLER.limit(limits=1, user_api="blas"):
        yield


def blas_for_order(n: int) -> contextlib.AbstractContextManager:
    """One BLAS thread for a dense factorisation of order ``n`` below :data:`SMALL_DENSE`."""
    return single_threaded_blas() if n < SMALL_DENSE else contextlib.nullcontext()
