"""A cluster dsvm starts: a batch system's refusal, a job that can never start or that ended before its
worker joined are one line at once, quoting the batch system; the timeout names each job's state.

``sbatch``, ``squeue`` and ``scancel`` are small scripts put first on PATH: dask-jobqueue runs them as
it would run SLURM's (tests/integration/test_slurm.py runs the real ones when SLURM is there)."""

from __future__ import annotations

import asyncio
import logging
import os
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("dask_jobqueue")

FAKE_SBATCH = """#!/bin/sh
echo "sbatch $*" >> "$FAKE_LOG"
case "$FAKE_SBATCH" in
  refuse) echo "sbatch: error: invalid partition specified: gpu" >&2
          echo "sbatch: error: Batch job submission failed: Invalid partition name specified" >&2; exit 1 ;;
  *) echo 4242 ;;
esac
"""
FAKE_SQUEUE = """#!/bin/sh
echo "squeue $*" >> "$FAKE_LOG"
[ -n "$FAKE_SQUEUE" ] && echo "$FAKE_SQUEUE"
exit 0
"""
FAKE_SCANCEL = """#!/bin/sh
echo "scancel $*" >> "$FAKE_LOG"
"""


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """sbatch / squeue / scancel that do what FAKE_SBATCH and FAKE_SQUEUE say; what they were asked is in the
    returned log file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("squeue", FAKE_SQUEUE), ("scancel", FAKE_SCANCEL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.delenv("FAKE_SBATCH", raising=False)
    monkeypatch.delenv("FAKE_SQUEUE", raising=False)
    return log


@pytest.fixture
def tiny_libsvm(tmp_path):
    path = tmp_path / "tiny.libsvm"
    path.write_text("+1 1:0.5 2:1\n-1 1:0.1 3:1\n+1 2:0.7\n-1 3:0.2\n")
    return path


def _spec(tmp_path: Path, timeout: int = 120, queue: str = "debug") -> Path:
    path = tmp_path / "slurm.yaml"
    path.write_text(textwrap.dedent(f"""\
        module: dask_jobqueue
        class: SLURMCluster
        kwargs:
          queue: {queue}
          cores: 1
          memory: 1GiB
          walltime: "00:05:00"
          job_name: dsvm-worker
          log_directory: {tmp_path / "logs"}
        scale: 1
        wait_for_workers: 1
        timeout: {timeout}
        """))
    return path


def _train_error(tmp_path, data, capsys, spec) -> str:
    from dsvm.app.cli import main

    capsys.readouterr()
    assert main(["-q", "train", str(data), "--model", str(tmp_path / "m.npz"), "--cluster", str(spec)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("dsvm train: error: "), err
    assert not (tmp_path / "m.npz").exists()
    return err[0]


def test_a_worker_job_the_batch_system_refuses_fails_at_once_in_its_words(tmp_path, tiny_libsvm, capsys, fake_slurm,
                                                                          monkeypatch):
    """`queue: gpu` on a SLURM without it: sbatch refused at once, dsvm printed two tornado tracebacks, waited
    the whole timeout and ended with "only 0 of 1 workers joined"."""
    monkeypatch.setenv("FAKE_SBATCH", "refuse")
    line = _train_error(tmp_path, tiny_libsvm, capsys, _spec(tmp_path, timeout=600, queue="gpu"))
    assert line == ("dsvm train: error: " + str(tmp_path / "slurm.yaml") + ": sbatch refused the worker job: "
                    "sbatch: error: invalid partition specified: gpu; sbatch: error: Batch job submission failed: "
                    "Invalid partition name specified")


def test_a_job_slurm_will_never_start_fails_at_once_naming_the_reason_and_is_cancelled(tmp_path, tiny_libsvm, capsys,
                                                                                       fake_slurm, monkeypatch):
    """A job larger than any node pends for ever with reason PartitionConfig."""
    monkeypatch.setenv("FAKE_SQUEUE", "4242|PENDING|PartitionConfig")
    line = _train_error(tmp_path, tiny_libsvm, capsys, _spec(tmp_path, timeout=600))
    assert "SLURM will not start the worker job 4242 (PENDING, PartitionConfig): the partition cannot give" in line
    calls = fake_slurm.read_text()
    assert "squeue -h --states=all -j 4242" in calls and "scancel 4242" in calls


def test_a_job_that_ended_before_its_worker_joined_names_its_state_and_log(tmp_path, tiny_libsvm, capsys, fake_slurm,
                                                                           monkeypatch):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "dsvm-worker-4242.err").write_text("starting\n/opt/py/bin/python: No such file or directory\n")
    monkeypatch.setenv("FAKE_SQUEUE", "4242|FAILED|NonZeroExitCode")
    line = _train_error(tmp_path, tiny_libsvm, capsys, _spec(tmp_path, timeout=600))
    assert "the worker job 4242 is FAILED (NonZeroExitCode) and its worker never joined; its log " in line
    assert line.endswith("dsvm-worker-4242.err ends: /opt/py/bin/python: No such file or directory")


def test_a_fifo_in_place_of_the_jobs_log_is_not_read(tmp_path, tiny_libsvm, capsys, fake_slurm, monkeypatch):
    (tmp_path / "logs").mkdir()
    os.mkfifo(tmp_path / "logs" / "dsvm-worker-4242.err")  # opening it for reading would wait for a writer
    monkeypatch.setenv("FAKE_SQUEUE", "4242|FAILED|NonZeroExitCode")
    line = _train_error(tmp_path, tiny_libsvm, capsys, _spec(tmp_path, timeout=600))
    assert line.endswith("the worker job 4242 is FAILED (NonZeroExitCode) and its worker never joined")


def test_a_job_no_longer_in_the_queue_fails_the_wait(tmp_path, tiny_libsvm, capsys, fake_slurm):
    line = _train_error(tmp_path, tiny_libsvm, capsys, _spec(tmp_path, timeout=600))
    assert "the worker job 4242 is GONE (no longer in the queue) and its worker never joined" in line


def test_a_job_waiting_for_resources_is_waited_for_and_the_timeout_names_its_state(tmp_path, tiny_libsvm, capsys,
                                                                                  fake_slurm, monkeypatch):
    monkeypatch.setenv("FAKE_SQUEUE", "4242|PENDING|Resources")
    line = _train_error(tmp_path, tiny_libsvm, capsys, _spec(tmp_path, timeout=4))
    assert "only 0 of 1 workers joined within 4 s (job 4242 is PENDING (Resources)); check the queue" in line
    assert "scancel 4242" in fake_slurm.read_text()  # the close cancels what it submitted


def test_a_jobqueue_error_outside_a_wait_is_one_log_line(caplog):
    """A submission that fails later (adapt scaling up mid-run) is one line in the log, once."""
    from dask_jobqueue.core import Job

    from dsvm.app._cluster_lifecycle import job_failures

    with pytest.raises(RuntimeError) as info:
        asyncio.run(Job._call(["sh", "-c", "echo 'sbatch: error: QOSMaxSubmitJobPerUserLimit' >&2; exit 1"]))
    loop_log = logging.getLogger("tornado.application")
    with job_failures() as failures, caplog.at_level(logging.ERROR, logger="tornado.application"):
        loop_log.error("Exception in callback", exc_info=info.value)
        loop_log.error("Exception in callback", exc_info=info.value)
        loop_log.error("something else")
    assert failures.failures == ["sh refused the worker job: sbatch: error: QOSMaxSubmitJobPerUserLimit"]
    messages = [(r.getMessage(), r.exc_info) for r in caplog.records if r.name == "tornado.application"]
    assert messages == [("sh refused the worker job: sbatch: error: QOSMaxSubmitJobPerUserLimit", None),
                        ("something else", None)]
