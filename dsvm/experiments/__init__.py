"""The LA-SN paper's experiments, reproduced as plain functions on in-memory arrays.

``dsvm run pipelines/paper.yaml`` runs all of them and writes one report folder
(``report.md``, ``report.json``, PNG plots; the driver and the report are
:mod:`dsvm.app._paper` and :mod:`dsvm.app._paper_report`).  Each experiment can
be run (and tested) on its own:

:func:`table3`
    *t_linear* — the time of the reduced linear solve only — of LA-SN (the
    semismooth Newton method, :func:`dsvm.solvers.semismooth_newton`), LA-DCD
    and LA-TRON (LIBLINEAR's dual coordinate descent and trust-region Newton
    through scikit-learn's ``LinearSVC(dual=True / False)``) and dsvm's own
    TRON, all on the *same* Nyström feature matrix (one landmark set per
    repetition), with the objective each reached and its test accuracy.
    "At equal objective": every solver is judged by dsvm's objective
    ``½‖w‖² + C Σ max(0, 1 − y(f·w + b))²`` (bias not regularised) against the
    optimum ``Φ*`` of a tight float64 Newton solve.  LA-SN runs at its default
    ``tol=1e-4`` (tighter, down the same ladder, where that misses ``Φ*``)
    and solves as ``NystroemSVC`` does, opening from a row subsample's
    solution where the estimator would (at least 40,000 rows: w8a, ijcnn1;
    the subsample's Newton solve first, then the full one from its solution); each other solver runs down
    a tolerance ladder (1e-1, 1e-2, …) and is timed at the *loosest*
    tolerance whose solution is within ``1e-4`` (relative) of ``Φ*`` — a
    setting that favours LIBLINEAR.
    LIBLINEAR regularises the bias (``intercept_scaling=1``, its default);
    that costs it at most ``½ b²`` against ``Φ*``.
:func:`lasn_fits` + :func:`table4`
    LA-SN (``NystroemSVC.fit`` end to end, one landmark seed per repetition)
    against LIBSVM (scikit-learn ``SVC``, fitted once): training time and test
    accuracy, mean ± std over the seeds.
:func:`sensitivity`
    An 80 % / 20 % split of the training set: k-fold CV accuracy on the 80 %
    and accuracy on the held-out 20 % over a grid of ``k`` and ``C``.
:func:`structure_benchmark`
    What structure is worth: a generic solver (SciPy's SLSQP) on the dual QP of
    the hinge-loss SVM against LIBSVM (SMO, the same QP) and dsvm (LA-SN on the
    L2-loss Nyström approximation) at a few sizes ``N``, with the exact dual
    optimum from Clarabel (:func:`dsvm.reference.dual_qp`) as the oracle.

Everything here runs in this process on numpy / scipy.sparse input — what the
paper measures.  The pipeline ingests the LIBSVM files with :mod:`dsvm.io` (on
the active Dask scheduler) and loads them with ``Dataset.load()``; it can
also fit LA-SN once more from the zarr dataset on the active cluster
(``dask_fit``) to show the distributed path gives the same model.

BLAS threads are limited to ``blas_threads`` (default 1) and dsvm keeps all
rows in one block (``single_core``, default true) while the experiments run:
LIBLINEAR and LIBSVM are single-threaded, so every solver uses one core.  (On
a shared machine a multi-threaded OpenBLAS that has to wait for a busy core
also slows small factorisations down by orders of magnitude.)

This package uses dsvm's public API only, and writes no files of its own.
"""


from ._datasets import PAPER_DATASETS, PaperDataset, Split, load_split, subsample
from ._linear import SOLVERS
from ._paper_claims import claims
from ._sensitivity_grid import sensitivity
from ._settings import DEFAULTS, QUICK, dataset_settings, paper_config
from ._structure import structure_benchmark
from ._tables import lasn_fits, libsvm_fit, table3, table4

__all__ = [
    "DEFAULTS", "PAPER_DATASETS", "PaperDataset", "QUICK", "SOLVERS", "Split", "claims", "dataset_settings",
    "lasn_fits", "libsvm_fit", "load_split", "paper_config", "sensitivity", "structure_benchmark", "subsample",
    "table3", "table4",
]
