"""What the worker processes of a cluster dsvm starts print: a failed task is dsvm's one error line (not also
distributed's ``Compute Failed`` block with the task's traceback), a warning one line."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import run_dsvm

from dsvm.app.cluster import connect

LOCAL = ("--workers", "1", "--threads-per-worker", "1")


def _write_libsvm(path: Path, X: np.ndarray, y) -> Path:
    path.write_text("".join(f"{label} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(row)) + "\n"
                            for row, label in zip(X, y)))
    return path


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    return _write_libsvm(tmp_path / "d.libsvm", X, np.where(X[:, 0] > 0, 1, -1))


def _stderr_lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


def test_a_task_that_fails_on_a_worker_is_dsvm_s_one_line(tmp_path, data):
    """A poly kernel that overflows float32 fails in the workers' feature blocks: distributed printed
    ``Compute Failed`` with the task's traceback before dsvm's line."""
    proc = run_dsvm("train", str(data), "--model", "m.npz", "--kernel", "poly", "--degree", "50", "--gamma", "10",
                    "-k", "10", *LOCAL, cwd=tmp_path)
    lines = _stderr_lines(proc)
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("dsvm train: error: the features of row ") and "overflows float32" in lines[0]


def test_labels_the_model_never_saw_are_one_line(tmp_path, data):
    run_dsvm("train", str(data), "--model", "m.npz", "-k", "10", *LOCAL, cwd=tmp_path, check=True)
    other = _write_libsvm(tmp_path / "o.libsvm", np.ones((6, 4)), [5, 7] * 3)
    proc = run_dsvm("evaluate", "m.npz", str(other), *LOCAL, cwd=tmp_path)
    lines = _stderr_lines(proc)
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("dsvm evaluate: error: y holds labels [5.0, 7.0] that the model was not trained on")


def test_the_debug_log_level_still_shows_the_workers_report(tmp_path, data):
    proc = subprocess.run([sys.executable, "-m", "dsvm", "--log-level", "DEBUG", "--no-progress", "train", str(data),
                           "--model", "m.npz", "--kernel", "poly", "--degree", "50", "--gamma", "10", "-k", "10",
                           *LOCAL], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Compute Failed" in proc.stderr and "dsvm train: error: the features of row " in proc.stderr


def _warn(text: str) -> int:
    warnings.warn(text, RuntimeWarning, stacklevel=1)
    return 1


def test_a_warning_in_a_worker_process_is_one_line(capfd):
    """A worker's warning had Python's two-line form: ``FILE:LINE: RuntimeWarning: ...`` and the source line."""
    with connect(local={"n_workers": 1, "threads_per_worker": 1}) as client:
        assert client.submit(_warn, "careful: overflow", pure=False).result() == 1
    err = capfd.readouterr().err
    shown = [line for line in err.splitlines() if "careful" in line or "warnings.warn" in line]
    assert len(shown) == 1 and re.search(r" WARNING dsvm\.worker: RuntimeWarning: careful: overflow$", shown[0]), err
