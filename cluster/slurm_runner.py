"""Run one ``dsvm`` command inside a SLURM allocation (dask-jobqueue's ``SLURMRunner``).

Launch it with ``srun`` on all tasks of a job (see ``cluster/slurm-batch.sh``)::

    srun python cluster/slurm_runner.py run pipelines/a9a.yaml --set output=reports/a9a-$SLURM_JOB_ID

SLURM task 0 runs the Dask scheduler, task 1 runs the ``dsvm`` command (the
client), every other task runs one Dask worker; so ``--ntasks`` must be at
least 3.  They meet through a scheduler file in the submission directory
(``dsvm-scheduler-<jobid>.json``, which must be on a file system all nodes see).
When the command finishes, the scheduler and the workers shut down and the
job ends with the command's exit status.

Security: with the ``DASK_DISTRIBUTED__COMM__TLS__*`` settings that
``slurm-batch.sh`` exports (``DSVM_DASK_SECURITY=tls``, its default), the
scheduler, the workers and the client speak TLS and accept only peers holding
the job's temporary certificate (``python cluster/slurm_runner.py
--make-certificates DIR`` makes it, readable by its owner only).  Without
them the scheduler accepts anyone who reaches its address.

Environment (all optional):

``DSVM_DASK_INTERFACE``
    network interface for the scheduler and workers (e.g. ``ib0``; ``lo`` on a
    single node); default: all interfaces (with TLS).
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

import logging
import os
import socket
import sys
from pathlib import Path

logger = logging.getLogger("dsvm.slurm_runner")

CERT_FILE, KEY_FILE = "cert.pem", "key.pem"


def make_certificates(folder: str) -> None:
    """Write a temporary TLS certificate and its key for one job into the new folder ``folder``.

    The folder is made with mode 0700 and must not exist (a folder someone else
    made could be read by them); the files are 0600.  Every task of the job
    reads them from there (``DASK_DISTRIBUTED__COMM__TLS__*``), so it must be on
    a file system all the job's nodes see.
    """
    from distributed.security import Security

    os.mkdir(folder, 0o700)  # FileExistsError: never reuse a folder
    os.chmod(folder, 0o700)  # whatever the umask
    security = Security.temporary()
    for name, text in ((CERT_FILE, security.tls_ca_file), (KEY_FILE, security.tls_scheduler_key)):
        fd = os.open(Path(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)


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


def dashboard_link(dashboard: str) -> str | None:
    """distributed's ``dashboard.link`` template for a dashboard bound to ``dashboard`` (``HOST:PORT``).

    distributed advertises the dashboard at the scheduler's own host, which is
    wrong for one bound to a single address (127.0.0.1 by default): the link
    names the address it is bound to.  None (distributed's default) when it
    listens on every address.
    """
    host = dashboard.rpartition(":")[0].strip("[]")
    if host in ("", "0.0.0.0", "::"):
        return None
    return f"http://[{host}]:{{port}}/status" if ":" in host else f"http://{host}:{{port}}/status"


def _runner_class():
    """dask-jobqueue's ``SLURMRunner``, with its own link to the scheduler speaking TLS when the job does,
    and the scheduler's task saying where it listens."""
    from dask_jobqueue.slurm import SLURMRunner
    from distributed.core import rpc
    from distributed.security import Security

    class Runner(SLURMRunner):
        async def before_client_start(self) -> None:
            # the runner ends the scheduler through this link at the close: without the job's
            # certificate a TLS scheduler would refuse it
            self.scheduler_comm = rpc(self.scheduler_address, connection_args=Security().get_connection_args("client"))

        async def on_scheduler_start(self, scheduler) -> None:
            tls = scheduler.address.startswith("tls://")
            server = getattr(scheduler, "http_server", None)
            where = f"http://{server.address}:{server.port}/status" if server is not None else "none"
            logger.info("Dask scheduler at %s (%s); dashboard bound to %s on %s", scheduler.address,
                        "TLS: only this job's processes can connect" if tls else
                        "NO TLS: anyone who reaches this address can run code in this job", where,
                        socket.gethostname())

    return Runner


def _quiet_shutdown(client) -> None:
    """Workers and scheduler stop logging: what they would say while the job shuts them down is no news."""
    from dsvm.app.cluster import quiet_workers

    quiet_workers(client)
    try:
        client.run_on_scheduler(logging.disable, logging.CRITICAL)
    except Exception:  # the scheduler is gone already: nothing to quiet
        pass


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    if argv[0] == "--make-certificates":
        if len(argv) != 2:
            print("usage: slurm_runner.py --make-certificates NEW_FOLDER", file=sys.stderr)
            return 2
        try:
            make_certificates(argv[1])
        except OSError as exc:
            print(f"slurm_runner.py: error: {argv[1]}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        return 0
    import dask.config
    from distributed import Client

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    logger.setLevel(logging.INFO)
    from distributed.security import Security

    dashboard = os.environ.get("DSVM_DASHBOARD", "127.0.0.1:8787")
    # the job's TLS settings (DASK_DISTRIBUTED__COMM__TLS__*) given explicitly: distributed picks the
    # tls:// scheme for an interface only from a Security it is handed, not from its configuration
    scheduler_options: dict = {"dashboard_address": dashboard, "security": Security()}
    if os.environ.get("DSVM_DASK_INTERFACE"):
        scheduler_options["interface"] = os.environ["DSVM_DASK_INTERFACE"]
    scheduler_file = os.environ.get("DSVM_SCHEDULER_FILE", "dsvm-scheduler-{job_id}.json")
    link = dashboard_link(dashboard)
    wait = float(os.environ.get("DSVM_WORKER_WAIT", 300))
    with dask.config.set({"distributed.dashboard.link": link} if link else {}):
        # Tasks 0 (scheduler) and 2.. (workers) block inside the runner and exit from there;
        # only task 1 gets past this line.
        with _runner_class()(scheduler_file=scheduler_file, scheduler_options=scheduler_options,
                             worker_options=_worker_options()) as runner:
            with Client(runner) as client:
                try:
                    client.wait_for_workers(runner.n_workers, timeout=wait)
                except TimeoutError:
                    have = len(client.scheduler_info(n_workers=-1)["workers"])
                    print(f"slurm_runner.py: error: only {have} of {runner.n_workers} Dask workers joined the "
                          f"scheduler within {wait:g} s (DSVM_WORKER_WAIT); see this job's log", file=sys.stderr)
                    _quiet_shutdown(client)
                    return 1
            from dsvm.app.cli import main as dsvm_main

            status = dsvm_main([*argv, "--scheduler-file", str(runner.scheduler_file)])
            with Client(runner) as client:
                _quiet_shutdown(client)
            return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
