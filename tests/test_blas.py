"""The client's dense factorisations run on one BLAS thread up to SMALL_DENSE, chosen by order alone."""

from threadpoolctl import threadpool_info

from dsvm.blas import SMALL_DENSE, blas_for_order


def _blas_threads() -> int:
    return max(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas")


def test_one_thread_up_to_small_dense_and_the_default_above():
    default = _blas_threads()
    for order in (10, 1000, 2000, SMALL_DENSE - 1):
        with blas_for_order(order):
            assert _blas_threads() == 1, order
    with blas_for_order(SMALL_DENSE):
        assert _blas_threads() == default
    assert _blas_threads() == default  # restored on leaving
