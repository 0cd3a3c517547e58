"""Every public name of README and of dsvm's earlier flat layout still resolves; the command is cheap to start;
the compatibility shims of 0.1.0 (``dsvm.cli``, ``dsvm.cluster``) are gone."""

import subprocess
import sys
from pathlib import Path

import pytest

import dsvm

REPO = Path(__file__).resolve().parents[1]

# dsvm.__all__ before the package was laid out by layer, plus the error types README names
NAMES = ["NystroemSVC", "NystroemSVR", "NystroemSVCCV", "PegasosSVC", "KernelSpec", "kernel_matrix", "FeatureMap",
         "fit_feature_map", "save_model", "load_model", "CheckpointMismatchError", "Dataset", "InvalidDatasetError",
         "InputFileError", "DiskFullError", "ingest", "open_dataset", "write_dataset", "make_classification_zarr",
         "ModelFileError", "NoWorkersError", "evaluate", "__version__", "NonFiniteError", "DenseLandmarksError",
         "MixedScalesWarning", "OneClassFitWarning"]


@pytest.mark.parametrize("name", NAMES)
def test_public_names_resolve_and_are_listed(name):
    assert getattr(dsvm, name) is not None
    assert name in dsvm.__all__ and name in dir(dsvm)


def test_names_readme_and_the_cluster_docs_use():
    from dsvm.app.cluster import ALLOWED_MODULES, WORKER_MALLOC_ENV, cluster_class, connect, load_cluster_spec
    from dsvm.reference import dual_qp, primal_qp, subgradient_descent
    from dsvm.solvers import choose_hessian

    assert callable(choose_hessian) and callable(primal_qp) and callable(dual_qp) and callable(subgradient_descent)
    assert "dask_jobqueue" in ALLOWED_MODULES and "MALLOC_TRIM_THRESHOLD_" in WORKER_MALLOC_ENV
    assert callable(connect) and callable(load_cluster_spec) and callable(cluster_class)
    assert dsvm.experiments.PAPER_DATASETS["a9a"].n_features == 123
    assert dsvm.io.ingest is dsvm.ingest and dsvm.config.get("memory-fraction") > 0
    # one error type per failure, from dsvm.exceptions (the layers do not re-export it)
    assert dsvm.exceptions.ModelFileError is dsvm.ModelFileError and dsvm.exceptions.NoWorkersError is dsvm.NoWorkersError
    assert not hasattr(dsvm.io, "ModelFileError") and not hasattr(dsvm.blocks, "NoWorkersError")


@pytest.mark.parametrize("module", ["dsvm.cli", "dsvm.cluster"])
def test_the_shims_are_gone(module):
    """``python -m dsvm.cli`` is ``dsvm`` / ``python -m dsvm``; the cluster specs are ``dsvm.app.cluster``."""
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'estimator'"):
        dsvm.estimator  # noqa: B018  (the flat modules are gone)


@pytest.mark.parametrize("module", ["dsvm", "dsvm.app.cli"])
def test_the_command_runs_as_a_module(module):
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, cwd=REPO,
                         timeout=120)
    assert out.returncode == 0 and "usage: dsvm" in out.stdout and "train" in out.stdout


def test_the_command_line_loads_no_heavy_library():
    """What `dsvm --help` pays for: no scikit-learn, SciPy, Dask arrays, distributed or zarr."""
    code = ("import sys; from dsvm.app.cli import build_parser; build_parser(); print(sorted(m for m in ("
            "'sklearn', 'scipy', 'dask.array', 'distributed', 'zarr') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_estimator_parameters_are_keyword_only():
    """Constructor arguments are keyword-only (as in scikit-learn): a positional value is a TypeError, not a
    silent assignment to whichever parameter comes first."""
    import inspect

    import pytest

    import dsvm

    for cls in (dsvm.NystroemSVC, dsvm.NystroemSVR, dsvm.PegasosSVC):
        params = list(inspect.signature(cls).parameters.values())
        assert params and all(p.kind is p.KEYWORD_ONLY for p in params), cls
        with pytest.raises(TypeError):
            cls("rbf")
    search = inspect.signature(dsvm.NystroemSVCCV).parameters.values()
    assert [p.name for p in search if p.kind is not p.KEYWORD_ONLY] == ["param_grid"]
