"""Checkpoints: SIGKILL + resume gives the same model; foreign checkpoints are refused; what a resume in
another process relies on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from helpers import KillOnIteration, interrupt_fit

import dsvm

PARAMS = dict(C=10.0, gamma=0.1, n_components=150, random_state=0, tol=1e-8, dtype="float64")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("checkpoint") / "train.zarr"
    return dsvm.make_classification_zarr(path, n_samples=60_000, n_features=10, chunk_rows=7_500, random_state=3)



FINGERPRINT_OF_STRING_LABELS = """
import numpy as np
from dsvm.blocks import as_row_blocks, aligned_vector
from dsvm.svm._checkpoint import data_fingerprint
X = as_row_blocks(np.ones((4, 2)), 2, min_blocks=1)
y = aligned_vector(np.array(["spam", "ham", "spam", "ham"], dtype=object), X)
print(repr(data_fingerprint(X, y).tolist()))
"""


def test_fingerprint_of_string_labels_is_the_same_in_every_process():
    """With Python's randomised str hash, a resumed fit with string labels was always 'other data'."""
    runs = {subprocess.run([sys.executable, "-c", FINGERPRINT_OF_STRING_LABELS], capture_output=True, text=True,
                           check=True, timeout=120).stdout for _ in range(2)}
    assert len(runs) == 1, runs


def _train_cmd(data, model, ckpt=None, store="auto"):
    cmd = [sys.executable, "-m", "dsvm", "train", str(data), "--model", str(model), "-C", "10", "--gamma", "0.1",
           "-k", "150", "--random-state", "0", "--tol", "1e-8", "--dtype", "float64", "--feature-store", store]
    return cmd + (["--checkpoint", str(ckpt)] if ckpt else [])


@pytest.mark.slow
@pytest.mark.parametrize("store", ["auto", "implicit"])
def test_sigkill_during_training_then_resume_gives_the_same_model(tmp_path, dataset, store):
    reference = tmp_path / "reference.npz"
    subprocess.run(_train_cmd(dataset.path, reference, store=store), check=True, capture_output=True, timeout=600)

    ckpt, model = tmp_path / "fit.ckpt.npz", tmp_path / "model.npz"
    proc = subprocess.Popen(_train_cmd(dataset.path, model, ckpt, store), stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL,
                            start_new_session=True, text=True)
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if "newton it=2 " in line and "[subsample]" not in line:  # the full solve's, not the opening's
                os.killpg(proc.pid, signal.SIGKILL)  # the whole process group: CLI, scheduler, workers
                break
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "".join(seen[-20:])
    assert ckpt.exists() and not model.exists()

    again = subprocess.run(_train_cmd(dataset.path, model, ckpt, store), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming after iteration" in again.stderr
    assert not ckpt.exists()  # removed once the fit completed
    a, b = dsvm.load_model(reference), dsvm.load_model(model)
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.intercept_, a.intercept_, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_checkpoint_of_other_data_or_parameters_is_refused(tmp_path, dataset):
    ckpt = tmp_path / "fit.ckpt.npz"
    X, y = dataset.load()
    X, y = X[:3000], y[:3000]

    def interrupted_fit(**kw):
        clf = dsvm.NystroemSVC(**{**PARAMS, "n_components": 40, **kw}, checkpoint=str(ckpt))
        interrupt_fit(lambda: clf.fit(X, y), KillOnIteration(1, lambda: (_ for _ in ()).throw(KeyboardInterrupt())))

    interrupted_fit()
    assert ckpt.exists()
    with pytest.raises(dsvm.CheckpointMismatchError, match="other parameters .*C"):
        dsvm.NystroemSVC(**{**PARAMS, "n_components": 40, "C": 1.0}, checkpoint=str(ckpt)).fit(X, y)
    X2 = X.copy()
    X2[17, 3] += 0.5
    with pytest.raises(dsvm.CheckpointMismatchError, match="other data"):
        dsvm.NystroemSVC(**{**PARAMS, "n_components": 40}, checkpoint=str(ckpt)).fit(X2, y)
    sw = np.ones(len(y))
    sw[42] = 2.0  # other weights are another problem: resuming would mix two models
    with pytest.raises(dsvm.CheckpointMismatchError, match="other data"):
        dsvm.NystroemSVC(**{**PARAMS, "n_components": 40}, checkpoint=str(ckpt)).fit(X, y, sample_weight=sw)
    # the right data and parameters resume and finish
    # (weights of one are the unweighted problem)
    done = dsvm.NystroemSVC(**{**PARAMS, "n_components": 40}, checkpoint=str(ckpt)).fit(
        X, y, sample_weight=np.ones(len(y)))
    fresh = dsvm.NystroemSVC(**{**PARAMS, "n_components": 40}).fit(X, y)
    np.testing.assert_allclose(done.coef_, fresh.coef_, rtol=1e-10, atol=1e-12)
    assert not ckpt.exists()
