"""``make_classification_zarr``: deterministic whatever the chunking, and non-linear."""

from __future__ import annotations

import numpy as np
import pytest

from dsvm.io import make_bumps_zarr, make_classification_zarr, open_dataset
from dsvm.io._synthetic import GENERATION_BLOCK, BumpsSource, SphereSource


def test_independent_of_chunking(tmp_path):
    n = GENERATION_BLOCK + 4000  # crosses a generation block
    a = make_classification_zarr(tmp_path / "a.zarr", n, 6, chunk_rows=9000, random_state=3)
    b = make_classification_zarr(tmp_path / "b.zarr", n, 6, chunk_rows=GENERATION_BLOCK + 1, random_state=3)
    assert a.X.chunks[0][0] == 9000 and b.X.chunks[0][0] == GENERATION_BLOCK + 1
    Xa, ya = a.load()
    Xb, yb = b.load()
    np.testing.assert_array_equal(Xa, Xb)
    np.testing.assert_array_equal(ya, yb)
    # any row range can be generated on its own
    src = SphereSource(n, 6, 5, 0.05, 3)
    X_part, y_part = src.read(GENERATION_BLOCK - 10, GENERATION_BLOCK + 10)
    np.testing.assert_array_equal(X_part.astype(np.float32), Xa[GENERATION_BLOCK - 10 : GENERATION_BLOCK + 10])
    np.testing.assert_array_equal(y_part, ya[GENERATION_BLOCK - 10 : GENERATION_BLOCK + 10])
    c = make_classification_zarr(tmp_path / "c.zarr", 1000, 6, random_state=4)
    assert not np.array_equal(c.load()[0], Xa[:1000])


def test_dataset_properties(tmp_path):
    ds = make_classification_zarr(tmp_path / "d.zarr", 5000, 12, chunk_rows=1024, random_state=0, noise=0.1)
    assert (ds.n_samples, ds.n_features, ds.sparse) == (5000, 12, False)
    assert ds.X.dtype == np.float32 and ds.y.dtype == np.int64
    np.testing.assert_array_equal(ds.classes, [-1, 1])
    assert abs(ds.class_counts[0] - 2500) < 200  # balanced
    assert ds.attrs["random_state"] == 0 and ds.attrs["generator"] == "sphere-v1"
    assert open_dataset(ds.path).attrs["uuid"] == ds.attrs["uuid"]
    X = ds.X.compute()
    assert abs(X.mean()) < 0.05 and abs(X.std() - 1) < 0.05


def test_linear_model_fails_rbf_succeeds(tmp_path):
    from sklearn.svm import SVC, LinearSVC

    ds = make_classification_zarr(tmp_path / "d.zarr", 4000, 20, random_state=0)
    X, y = ds.load()
    Xtr, ytr, Xte, yte = X[:2000], y[:2000], X[2000:], y[2000:]
    linear = LinearSVC().fit(Xtr, ytr).score(Xte, yte)
    rbf = SVC(kernel="rbf", C=10).fit(Xtr, ytr).score(Xte, yte)
    assert linear < 0.6
    assert rbf > 0.75
    assert rbf - linear > 0.2


def test_arguments(tmp_path):
    with pytest.raises(ValueError, match="n_informative"):
        make_classification_zarr(tmp_path / "a.zarr", 10, 3, n_informative=4)
    with pytest.raises(ValueError, match="n_samples"):
        make_classification_zarr(tmp_path / "a.zarr", 0)
    with pytest.raises(ValueError, match="noise"):
        make_classification_zarr(tmp_path / "a.zarr", 10, noise=0.7)
    ds = make_classification_zarr(tmp_path / "a.zarr", 10, random_state=None)
    assert isinstance(ds.attrs["random_state"], int)
    with pytest.raises(FileExistsError):
        make_classification_zarr(tmp_path / "a.zarr", 10)
    assert make_classification_zarr(tmp_path / "a.zarr", 20, overwrite=True).n_samples == 20


@pytest.mark.parametrize("options, message", [
    ({"n_features": "abc"}, r"^n_features must be a positive integer, got 'abc'$"),
    ({"n_samples": {"a": 1}}, r"^n_samples must be a positive integer, got \{'a': 1\}$"),
    ({"n_samples": 2.5}, r"^n_samples must be a positive integer, got 2\.5$"),
    ({"n_samples": True}, r"^n_samples must be a positive integer, got True$"),
    ({"n_informative": "2"}, r"^n_informative must be between 1 and n_features=20, got '2'$"),
    ({"noise": "x"}, r"^noise must be between 0 and 0\.5, got 'x'$"),
    ({"noise": float("nan")}, r"^noise must be between 0 and 0\.5, got nan$"),
    ({"random_state": "x"}, r"^random_state must be a non-negative integer or None, got 'x'$"),
    ({"chunk_rows": 0}, r"^chunk_rows must be a positive integer or None, got 0$"),
    ({"dtype": "abc"}, r"^dtype must be float32 or float64, got 'abc'$"),
])
def test_arguments_of_the_wrong_type_name_the_argument_before_anything_is_written(tmp_path, options, message):
    """`n_features="abc"` was numpy's "invalid literal for int() with base 10: 'abc'", naming nothing."""
    from dsvm.io import check_synthetic_options

    args = {"n_samples": 10, **options}
    with pytest.raises(ValueError, match=message):
        check_synthetic_options(**args)
    with pytest.raises(ValueError, match=message):
        make_classification_zarr(tmp_path / "a.zarr", **args)
    assert list(tmp_path.iterdir()) == []
    check_synthetic_options(10.0, np.int64(3), n_informative=2, random_state=None)  # whole floats, numpy integers


def test_a_dataset_larger_than_the_free_space_is_refused_at_once(tmp_path, monkeypatch):
    """`dsvm demo --n-train 100000000000` (7.3 TiB) started writing on a disk of 80 GiB, and ran for minutes."""
    import shutil
    from collections import namedtuple

    import dsvm.io._synthetic as synthetic
    from dsvm.exceptions import DiskFullError

    usage = namedtuple("usage", "total used free")
    asked = []

    def disk_usage(folder):
        asked.append(folder)
        return usage(2**30, 2**30 - 10 * 2**20, 10 * 2**20)  # 10 MiB free

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    writes = []
    monkeypatch.setattr(synthetic, "write_source", lambda *a, **k: writes.append(a))
    with pytest.raises(DiskFullError, match=r"a\.zarr: 1000000 rows x 20 features of float32 need at least 57\.2 "
                                            r"MiB on disk \(76\.3 MiB uncompressed\) and the file system of .* has "
                                            r"10\.0 MiB free; .*nothing was written$"):
        make_classification_zarr(tmp_path / "new" / "a.zarr", 1_000_000, 20)
    assert asked == [tmp_path] and writes == [] and list(tmp_path.iterdir()) == []
    # what may fit after compression is written (the writer reports a disk that fills)
    monkeypatch.setattr(synthetic, "write_source", lambda *a, **k: writes.append(a) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        make_classification_zarr(tmp_path / "b.zarr", 100_000, 20)  # 7.6 MiB uncompressed
    assert len(writes) == 1


def test_the_demo_refuses_more_rows_than_any_disk_holds(tmp_path):
    from helpers import run_dsvm

    proc = run_dsvm("demo", "--n-train", str(10**15), "--output", "out", "--workers", "1", "--threads-per-worker", "1",
                    cwd=tmp_path, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("dsvm demo: error: out/data/train.zarr: 1000000000000000 rows x 20 features of "
                               "float32 need at least "), lines
    assert not (tmp_path / "out" / "data").exists()


def test_the_bumps_problem_labels_the_sphere_inputs_by_a_sum_of_bumps_for_any_chunking(tmp_path):
    """Same inputs as the sphere for the same seed; labels the sign of Σ a_j exp(−s‖x − c_j‖²) − f_med, computed
    here from the source's centres and weights directly; balanced; independent of chunking."""
    a = make_bumps_zarr(tmp_path / "a.zarr", 3000, 12, n_bumps=300, noise=0.0, chunk_rows=1000, random_state=4)
    b = make_bumps_zarr(tmp_path / "b.zarr", 3000, 12, n_bumps=300, noise=0.0, chunk_rows=777, random_state=4)
    sphere = make_classification_zarr(tmp_path / "s.zarr", 3000, 12, noise=0.0, random_state=4)
    Xa, ya = a.load()
    Xb, yb = b.load()
    np.testing.assert_array_equal(Xa, Xb)
    np.testing.assert_array_equal(ya, yb)
    np.testing.assert_array_equal(Xa, sphere.load()[0])
    src = BumpsSource(3000, 12, 300, 0.3, 0.0, 4)
    X = Xa.astype(np.float64)
    d2 = ((X[:, None, :] - src.centres[None, :, :]) ** 2).sum(axis=2)
    f = np.exp(-d2 / (2 * 0.3**2 * 12)) @ src.weights
    expected = np.where(f > src.offset, 1, -1)
    assert (expected == ya).mean() > 0.999  # rows within float32 rounding of the boundary may differ
    assert 0.45 < (ya > 0).mean() < 0.55
    assert a.attrs["generator"] == "bumps-v1" and a.attrs["n_bumps"] == 300


def test_the_bumps_problem_gains_accuracy_with_landmarks(tmp_path):
    from dsvm import NystroemSVC

    X, y = make_bumps_zarr(tmp_path / "b.zarr", 24_000, 10, n_bumps=1000, noise=0.0, random_state=0).load()
    scores = [NystroemSVC(n_components=k, C=10.0, random_state=0).fit(X[:20_000], y[:20_000]).score(X[20_000:], y[20_000:])
              for k in (25, 400)]
    assert scores[1] > scores[0] + 0.03


@pytest.mark.parametrize("options,message", [({"n_bumps": 0}, "n_bumps must be a positive integer"),
                                             ({"width": 0.0}, "width must be a positive number"),
                                             ({"width": "wide"}, "width must be a positive number")])
def test_bad_bumps_arguments_are_named_before_anything_is_written(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        make_bumps_zarr(tmp_path / "x.zarr", 100, 5, **options)
    assert not (tmp_path / "x.zarr").exists()
