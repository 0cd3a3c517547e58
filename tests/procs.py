"""Helpers for tests that start real processes: dask schedulers/workers and the dsvm command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def spawn(args: list[str], log: Path) -> subprocess.Popen:
    """``python -m <args>`` in its own session (the process group can be signalled as a whole)."""
    return subprocess.Popen([sys.executable, "-m", *args], stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop(procs: list[subprocess.Popen], sig: int = signal.SIGTERM) -> None:
    """Signal process groups and reap them (SIGKILL after 15 s)."""
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 15
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=5)


def start_scheduler(tmp: Path) -> tuple[subprocess.Popen, Path, str]:
    """A ``dask scheduler`` on 127.0.0.1 with a scheduler file; returns (process, file, address)."""
    sched_file = tmp / "scheduler.json"
    proc = spawn(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                  "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)], tmp / "scheduler.log")
    deadline = time.monotonic() + 60
    while not sched_file.exists() or not sched_file.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop([proc])
            pytest.fail(f"dask scheduler did not start:\n{(tmp / 'scheduler.log').read_text()[-3000:]}")
        time.sleep(0.1)
    return proc, sched_file, json.loads(sched_file.read_text())["address"]


def start_worker(sched_file: Path, log: Path, name: str, nanny: bool = True, memory: str = "2GiB") -> subprocess.Popen:
    args = ["distributed.cli.dask_worker", "--scheduler-file", str(sched_file), "--host", "127.0.0.1",
            "--nthreads", "1", "--name", name, "--dashboard-address", "127.0.0.1:0", "--memory-limit", memory]
    if not nanny:
        args.append("--no-nanny")
    return spawn(args, log)


def _worker_rss_mib(modules: tuple[str, ...]) -> float:
    import importlib

    import psutil

    # A worker unpickles Dask's own block functions before dsvm's, so it imports dask.array before dsvm's
    # import hook (dsvm.lazy) could defer pydata sparse: with dsvm first, the figure left numba out.
    for name in ("dask.array", *modules):
        importlib.import_module(name)
    return psutil.Process().memory_info().rss / 2**20


def idle_worker_mib(*modules: str) -> float:
    """Resident memory (MiB) of a fresh Dask worker process once it has imported ``modules``: what a
    memory-limited worker of this environment holds before any work (it differs between environments —
    dask-ml, for one, makes every ``dask.array`` import load numba)."""
    import distributed

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1") as cluster, distributed.Client(cluster) as client:
        return float(next(iter(client.run(_worker_rss_mib, modules).values())))
