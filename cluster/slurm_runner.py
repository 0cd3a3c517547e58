"""Run one ``dsvm`` command inside a SLURM allocation (dask-jobqueue's ``SLURMRunner``).

Launch it with ``srun`` on all tasks of a job (see ``cluster/slurm-batch.sh``)::

    srun python cluster/slurm_runner.py run pipelines/a9a.yaml --set output=reports/a9a-$SLURM_JOB_ID

SLURM task 0 runs the Dask scheduler, task 1 runs the ``dsvm`` command (the
client), every other task runs one Dask worker; so ``--ntasks`` must be at
least 3.  They meet through a scheduler file in the submission directory
(``dsvm-scheduler-<jobid>.json``, which must be on a file system all nodes see).
When the command finishes, the scheduler and the workers shut down and the
job ends with the command's exit status.

Environment (all optional):

``DSVM_DASK_INTERFACE``
    network interface for the scheduler and workers (e.g. ``ib0``; ``lo`` on a
    single node); default: whatever the host name resolves to.
``DSVM_SCHEDULER_FILE``
    scheduler file; ``{job_id}`` is replaced by the job id.
``DSVM_DASHBOARD``
    dashboard address of the scheduler (default ``127.0.0.1:8787``: reach it
    with ``ssh -L 8787:127.0.0.1:8787 <node of task 0>``).
``DSVM_WORKER_WAIT``
    seconds the client waits for all workers (default 300).

Needs ``pip install 'dsvm[slurm]'`` (dask-jobqueue >= 0.9).
"""

from __future__ import annotations

import os
import sys


def _worker_options() -> dict:
    opts: dict = {}
    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    if cpus:
        opts["nthreads"] = int(cpus)
    mem_per_cpu = os.environ.get("SLURM_MEM_PER_CPU")  # MiB
    if mem_per_cpu and cpus:
        opts["memory_limit"] = int(mem_per_cpu) * int(cpus) * 2**20
    tmp = os.environ.get("TMPDIR")
    if tmp:
        opts["local_directory"] = tmp
    if os.environ.get("DSVM_DASK_INTERFACE"):
        opts["interface"] = os.environ["DSVM_DASK_INTERFACE"]
    opts["dashboard"] = False
    return opts


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    from dask_jobqueue.slurm import SLURMRunner
    from distributed import Client

    scheduler_options: dict = {"dashboard_address": os.environ.get("DSVM_DASHBOARD", "127.0.0.1:8787")}
    if os.environ.get("DSVM_DASK_INTERFACE"):
        scheduler_options["interface"] = os.environ["DSVM_DASK_INTERFACE"]
    scheduler_file = os.environ.get("DSVM_SCHEDULER_FILE", "dsvm-scheduler-{job_id}.json")
    # Tasks 0 (scheduler) and 2.. (workers) block inside SLURMRunner and exit from there;
    # only task 1 gets past this line.
    with SLURMRunner(scheduler_file=scheduler_file, scheduler_options=scheduler_options,
                     worker_options=_worker_options()) as runner:
        with Client(runner) as client:
            client.wait_for_workers(runner.n_workers, timeout=float(os.environ.get("DSVM_WORKER_WAIT", 300)))
        from dsvm.app.cli import main as dsvm_main

        return dsvm_main([*argv, "--scheduler-file", str(runner.scheduler_file)])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
