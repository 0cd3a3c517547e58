"""dsvm.lazy: Dask arrays without pydata sparse and numba (issue 25, item 18).

``import dask.array`` imports pydata ``sparse`` (and with it numba) whenever it is installed, as dask-ml's
dependencies install it: seconds of imports for every command.  The oracle is ``sys.modules`` of a fresh
interpreter after the command's imports, and Dask's own chunk-type check for ``sparse`` arrays.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

import dsvm

LOADED = "print('LOADED', sorted(m for m in ('numba', 'sparse') if m in sys.modules), 'dask.array' in sys.modules)"


def _run(code: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.fixture(scope="module")
def installed():
    """The premise: pydata sparse and numba are installed (the test extra's dask-ml brings them), so a plain
    ``import dask.array`` loads them."""
    if importlib.util.find_spec("sparse") is None or importlib.util.find_spec("numba") is None:
        pytest.skip("pydata sparse or numba is not installed: Dask has nothing to import")
    assert "LOADED ['numba', 'sparse'] True" in _run(f"import sys, dask.array; {LOADED}")


def test_info_imports_neither_sparse_nor_numba(tmp_path, installed):
    X = np.random.default_rng(0).normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(np.int64)
    dataset = dsvm.write_dataset(tmp_path / "d.zarr", X, y)
    dsvm.save_model(dsvm.NystroemSVC(n_components=10, random_state=0).fit(X, y), tmp_path / "m.npz")
    code = f"import sys; from dsvm.app.cli import main; assert main(['-q', 'info', sys.argv[1]]) == 0; {LOADED}"
    for path in (dataset.path, tmp_path / "m.npz"):
        out = _run(code, str(path))
        assert "LOADED [] " in out, out  # Dask arrays or not, no sparse and no numba
    assert out.rstrip().endswith("True")  # the model's info did import Dask arrays: the case that matters


def test_sparse_arrays_are_still_dask_chunks_once_imported(installed):
    """Deferred, not dropped: after dsvm imported Dask arrays, a later ``import sparse`` gives arrays Dask
    takes as chunks (its ``is_valid_chunk_type`` says so, and arithmetic with them stays lazy)."""
    code = (
        "import sys, numpy as np; import dsvm.blocks; import dask.array as da\n"
        "from dask.array.chunk_types import is_valid_chunk_type\n"
        f"{LOADED}\n"
        "import sparse\n"
        "x = da.from_array(sparse.COO.from_numpy(np.eye(4)), chunks=2)\n"
        "y = (x + 1).sum(axis=0).compute()\n"
        "print('CHUNKS', is_valid_chunk_type(sparse.COO), is_valid_chunk_type(list), type(y).__name__,"
        " y.todense().tolist())\n"
    )
    out = _run(code)
    assert "LOADED [] True" in out
    assert "CHUNKS True False COO [5.0, 5.0, 5.0, 5.0]" in out


def test_sparse_imported_first_is_left_alone(installed):
    code = ("import sys, sparse, dsvm.blocks, dask.array\n"
            "from dask.array.chunk_types import is_valid_chunk_type\n"
            "print('FIRST', is_valid_chunk_type(sparse.COO), any(type(f).__module__ == 'dsvm.lazy' "
            "for f in sys.meta_path))")
    assert "FIRST True False" in _run(code)
