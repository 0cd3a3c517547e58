"""Around a cluster dsvm starts: its sizes checked, its workers waited for (failing at once when they
cannot come), and a quiet close.

:func:`check_local_sizes` and :func:`local_cluster_options` refuse sizes of
the default local cluster that are not sizes (distributed takes
``n_workers=-1`` as a wait for workers that never come, ``memory_limit=0`` as
no limit, ``threads_per_worker=-1`` as a failed nanny) and more workers than
:data:`MAX_WORKERS_PER_CORE` per core of this machine; :func:`check_spec_workers`
holds a spec's ``LocalCluster`` to the same bound and refuses a spec that waits
for more workers than it starts.

A dask-jobqueue cluster submits one batch job per worker (``sbatch``, ``qsub``, ...).
When the batch system refuses a job (an unknown partition or account, a size no node
has), dask-jobqueue raises inside Dask's event loop: the error ends as a traceback in
the log, and the command went on waiting for its workers until the timeout.  Here:

* :class:`JobFailures` is a logging filter on the event loop's loggers
  (``tornado.application``, ``asyncio``): an exception raised by dask-jobqueue becomes
  one line, and is kept for the wait;
* :func:`slurm_job_states` asks SLURM (``squeue``) for the state of the jobs a cluster
  holds, with the reason SLURM gives;
* :func:`wait_for_workers` waits in slices and raises :class:`ClusterSpecError` as soon
  as a submission failed, a job ended before its worker joined, or SLURM keeps a job
  pending for a reason that waiting cannot change (:data:`HOPELESS_REASONS`), quoting
  the batch system's words; on the timeout it names every job's last state.

Job states are asked of SLURM only; for the other batch systems the wait fails at once
on a refused submission and otherwise at the timeout.

:func:`close_quietly` closes the client, then the cluster, with the workers'
and this process's cluster loggers silent: distributed logs every comm a
shutdown breaks (a heartbeat in flight when the scheduler closes: a
``CommClosedError`` traceback after a successful run).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import re
import shutil
import subprocess
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exceptions import ClusterSpecError
from ..user_files import open_user_file

__all__ = ["job_failures", "slurm_job_states", "wait_for_workers", "HOPELESS_REASONS", "check_local_sizes",
           "local_cluster_options", "quiet_workers", "close_quietly", "NOISY_LOGGERS", "MAX_WORKERS_PER_CORE",
           "check_spec_workers"]

logger = logging.getLogger(__name__)

#: the cluster libraries' loggers (their records are shown from WARNING up, and not at all during a close)
NOISY_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")

#: the loggers the event loop reports a callback's or a task's exception on
LOOP_LOGGERS = ("tornado.application", "asyncio")
#: seconds between two looks at the workers, and between two questions to the batch system
WAIT_SLICE_SECONDS = 0.5
JOB_POLL_SECONDS = 3.0
SQUEUE_TIMEOUT_SECONDS = 20.0
#: SLURM pending reasons that do not change by waiting: the job as asked for can never start
HOPELESS_REASONS = {
    "PartitionConfig": "the partition cannot give what the job asks for (nodes, cores, memory or time)",
    "PartitionNodeLimit": "the job asks for more nodes than the partition allows",
    "PartitionTimeLimit": "the job's walltime is over the partition's time limit",
    "BadConstraints": "no node has the features or resources the job asks for",
    "InvalidAccount": "the account is not valid",
    "InvalidQOS": "the QOS is not valid",
    "DependencyNeverSatisfied": "a dependency of the job can never be satisfied",
    "JobHeldAdmin": "an administrator holds the job",
    "JobHeldUser": "the job is held (scontrol release)",
}
#: SLURM job states after which no worker will join
ENDED_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                "DEADLINE", "PREEMPTED", "REVOKED", "SPECIAL_EXIT"}


@dataclass(frozen=True)
class JobState:
    """A batch job as the batch system reports it: ``state`` (``"PENDING"``, ...; ``"GONE"`` when it no
    longer lists the job) and its ``reason``."""

    job_id: str
    state: str
    reason: str = ""

    def describe(self) -> str:
        reason = f" ({self.reason})" if self.reason and self.reason != "None" else ""
        return f"job {self.job_id} is {self.state}{reason}"


def _jobqueue_frames(exc: BaseException) -> list:
    """The frames of dask-jobqueue's code that ``exc`` was raised through."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        if "dask_jobqueue" in tb.tb_frame.f_code.co_filename:
            frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames


def _one_line(exc: BaseException) -> str:
    """dask-jobqueue's error in one line: the refused command's stderr (its own words), else the message."""
    text = str(exc)
    command = re.search(r"Command:\n(\S+)", text)
    stderr = re.search(r"stderr:\n(.*)", text, re.S)
    lines = [line.strip() for line in (stderr.group(1) if stderr else "").splitlines() if line.strip()]
    if command and lines:
        return f"{Path(command.group(1)).name} refused the worker job: {'; '.join(lines)}"
    return f"starting a worker job failed: {' '.join(text.split()) or type(exc).__name__}"


class JobFailures(logging.Filter):
    """Keeps the exceptions dask-jobqueue raises in the event loop, each as one line.

    While :attr:`waiting` (someone will raise them), their records are dropped;
    otherwise the first record of each failure is logged as one line and repeats are dropped.
    The job objects whose start failed are kept (weakly) for :meth:`close_failed_jobs`.
    """

    def __init__(self, waiting: bool = False):
        super().__init__()
        self.failures: list[str] = []
        self.waiting = waiting
        self.failed_jobs: weakref.WeakSet = weakref.WeakSet()

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        frames = _jobqueue_frames(exc) if exc is not None else []
        if not frames:
            return True
        for frame in frames:
            if frame.f_code.co_name == "start" and frame.f_locals.get("self") is not None:
                self.failed_jobs.add(frame.f_locals["self"])
        line = _one_line(exc)
        seen = line in self.failures
        if not seen:
            self.failures.append(line)
        if self.waiting or seen:
            return False
        record.msg, record.args, record.exc_info, record.exc_text = line, (), None, None
        return True

    def close_failed_jobs(self) -> None:
        """Mark the jobs that were never submitted as failed, before their cluster is closed.

        A dask-jobqueue job whose submission failed stays "created", and
        distributed's close of the cluster asserts that none does
        (dask/distributed#6183): the close failed, and the cluster's exit
        handler waited for it again.  Then collect the failed tasks while this
        filter is on, so that asyncio's report of their exceptions is one line too.
        """
        from distributed.core import Status

        for job in list(self.failed_jobs):
            if job.status == Status.created:
                job.status = Status.failed
        if self.failures:
            gc.collect()


@contextlib.contextmanager
def job_failures(waiting: bool = False) -> Iterator[JobFailures]:
    """A :class:`JobFailures` filter on the event loop's loggers for the duration of the block
    (``waiting``: a wait for the workers will follow, and report what it keeps)."""
    failures = JobFailures(waiting)
    loggers = [logging.getLogger(name) for name in LOOP_LOGGERS]
    for log in loggers:
        log.addFilter(failures)
    try:
        yield failures
    finally:
        for log in loggers:
            log.removeFilter(failures)


def slurm_job_states(job_ids: list[str]) -> dict[str, JobState] | None:
    """``squeue``'s state and reason of each job (``"GONE"`` for one it no longer lists); None when
    ``squeue`` is missing or does not answer."""
    if not job_ids:
        return {}
    squeue = shutil.which("squeue")
    if squeue is None:
        return None
    cmd = [squeue, "-h", "--states=all", "-j", ",".join(job_ids), "-o", "%i|%T|%r"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_SECONDS)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0 and "invalid job id" not in proc.stderr.lower():
        return None
    states = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0] in job_ids:
            states[parts[0]] = JobState(parts[0], parts[1], parts[2])
    return {j: states.get(j, JobState(j, "GONE", "no longer in the queue")) for j in job_ids}


def _jobs(cluster) -> list[Any]:
    """The batch jobs a dask-jobqueue cluster holds (its ``workers``: one job object per job)."""
    return [job for job in getattr(cluster, "workers", {}).values() if getattr(job, "job_id", None)]


def _log_tail(job) -> str:
    """The last line of a job's error log (dask-jobqueue's ``log_directory``), or ''."""
    folder = getattr(job, "log_directory", None)
    if not folder:
        return ""
    name = getattr(job, "job_name", None) or "worker"
    path = Path(folder, f"{name}-{job.job_id}.err")
    try:
        with open_user_file(path, "job log", OSError) as f:  # never a FIFO someone put in the log folder
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            lines = [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return f"; its log {path} ends: {lines[-1]}" if lines else ""


def _job_problem(cluster, where: str, states: dict[str, JobState]) -> str | None:
    """Why no worker will come: a job ended before its worker joined, or pends for a reason waiting cannot
    change; None if none does.  (A message, not an exception: an exception's frames would keep the job
    objects alive while the cluster closes, and distributed's close asserts that the jobs it dropped are gone.)"""
    for job in _jobs(cluster):
        state = states.get(job.job_id)
        if state is None:
            continue
        if state.state in ENDED_STATES or state.state == "GONE":
            return f"{where}: the worker {state.describe()} and its worker never joined{_log_tail(job)}"
        if state.state == "PENDING" and state.reason in HOPELESS_REASONS:
            return (f"{where}: SLURM will not start the worker job {state.job_id} (PENDING, {state.reason}): "
                    f"{HOPELESS_REASONS[state.reason]}; change the spec's queue, account, cores, memory or walltime")
    return None


def wait_for_workers(client, cluster, n: int, timeout: float, where: str, failures: JobFailures | None = None,
                     is_slurm: bool = False) -> None:
    """Wait until ``n`` workers joined ``cluster``, failing at once when they cannot (module docstring).

    Raises
    ------
    ClusterSpecError
        A job was refused, ended or cannot start (the batch system's reason), or
        ``timeout`` seconds passed (naming each job's last state).
    """
    started = time.monotonic()
    next_poll = started
    states: dict[str, JobState] = {}
    try:
        while True:
            left = timeout - (time.monotonic() - started)
            try:
                client.wait_for_workers(n, timeout=max(0.01, min(WAIT_SLICE_SECONDS, left)))
                return
            except TimeoutError:
                pass
            if failures is not None and failures.failures:
                raise ClusterSpecError(f"{where}: {failures.failures[0]}")
            if is_slurm and time.monotonic() >= next_poll:
                states = slurm_job_states([job.job_id for job in _jobs(cluster)]) or states
                problem = _job_problem(cluster, where, states)
                if problem is not None:
                    raise ClusterSpecError(problem)
                next_poll = time.monotonic() + JOB_POLL_SECONDS
            if left <= 0:
                raise ClusterSpecError(_timeout_message(client, n, timeout, where, states))
    finally:
        if failures is not None:
            failures.waiting = False


def _timeout_message(client, n: int, timeout: float, where: str, states: dict[str, JobState]) -> str:
    from ..blocks import scheduler_workers

    have = len(scheduler_workers(client) or {})  # None: the scheduler does not answer either, no worker is known
    jobs = "; ".join(s.describe() for s in states.values())
    jobs = f" ({jobs})" if jobs else ""
    return (f"{where}: only {have} of {n} workers joined within {timeout:g} s{jobs}; check the queue "
            "(squeue / qstat / kubectl get pods) and the worker logs, or raise 'timeout'")


def _is_number(x: Any, types=(int, float)) -> bool:
    return isinstance(x, types) and not isinstance(x, bool)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: the command line's options that size the default local cluster -> (their ``args`` attributes,
#: ``LocalCluster`` keywords)
LOCAL_OPTIONS = {"--workers": ("workers", "n_workers"), "--threads-per-worker": ("threads_per_worker", "threads_per_worker"),
                 "--memory-limit": ("memory_limit", "memory_limit")}
#: the command line's options that name another cluster -> their ``args`` attributes
TARGET_OPTIONS = {"--cluster": "cluster", "--scheduler-address": "scheduler_address", "--scheduler-file": "scheduler_file"}


def _memory_limit(value: Any, name: str) -> Any:
    """A worker's memory limit as given (a size such as ``"2GiB"``, a number of bytes, or ``"auto"``)."""
    from dask.utils import parse_bytes

    if isinstance(value, str) and value.strip().lower() == "auto":
        return value
    try:
        n = parse_bytes(value) if isinstance(value, str) else value
    except (ValueError, TypeError):
        n = None
    if not _is_number(n) or not n > 0 or n != n:
        raise ClusterSpecError(f"{name} {value}: give a memory size such as 2GiB (or auto: this machine's memory "
                               "shared among the workers)")
    return value


#: worker processes a cluster on this machine may have per CPU core: more only compete for the cores and the
#: memory (each is a Python process of its own; a million of them grew memory without end and never failed)
MAX_WORKERS_PER_CORE = 4


def _check_local_workers(n: int, name: str) -> None:
    """Refuse more than :data:`MAX_WORKERS_PER_CORE` worker processes per CPU core of this machine."""
    cores = os.cpu_count() or 1
    if n > MAX_WORKERS_PER_CORE * cores:
        raise ClusterSpecError(f"{name} {n}: give at most {MAX_WORKERS_PER_CORE * cores} ({MAX_WORKERS_PER_CORE} "
                               f"worker processes per CPU core; this machine has {cores})")


def check_spec_workers(spec: dict[str, Any], where: str) -> None:
    """Refuse a validated spec that starts more local workers than this machine can run, or that waits for more
    workers than it can start.

    A ``LocalCluster`` runs here: its ``n_workers``, ``scale`` and ``adapt``
    maximum are held to :data:`MAX_WORKERS_PER_CORE` per core.  The workers a
    spec can start are known when it says so: ``adapt``'s ``maximum``;
    otherwise ``scale``, else ``kwargs.n_workers`` (dask-jobqueue starts none
    without it, dask-gateway none without ``scale`` or ``adapt``).  A
    dask-jobqueue ``scale`` counts workers but starts whole jobs, so it may
    start more than it says unless ``processes`` is given.

    Raises
    ------
    ClusterSpecError
        One line naming the number and where it comes from.
    """
    kwargs, adapt = spec.get("kwargs", {}), spec.get("adapt")
    if spec["class"] == "LocalCluster":
        for name, value in (("kwargs.n_workers", kwargs.get("n_workers")), ("scale", spec.get("scale")),
                            ("adapt.maximum", (adapt or {}).get("maximum"))):
            if value is not None:
                _check_local_workers(value, f"{where}: {name}")
    wait = spec.get("wait_for_workers")
    bound = _workers_bound(spec)
    if wait and bound is not None and wait > bound[0]:
        raise ClusterSpecError(f"{where}: wait_for_workers is {wait:g} but the spec starts at most {bound[0]} "
                               f"worker(s) ({bound[1]}); lower wait_for_workers or start more workers")


def _workers_bound(spec: dict[str, Any]) -> tuple[int, str] | None:
    """The most workers a spec starts, and what says so; None when the spec does not tell (see
    :func:`check_spec_workers`)."""
    kwargs, adapt, cls = spec.get("kwargs", {}), spec.get("adapt"), spec["class"]
    jobqueue = cls not in ("LocalCluster", "KubeCluster", "GatewayCluster")
    if adapt is not None:
        return (adapt["maximum"], "adapt.maximum") if "maximum" in adapt else None
    if "scale" in spec:
        n, what = spec["scale"], "scale"
    elif "n_workers" in kwargs:
        n, what = kwargs["n_workers"], "kwargs.n_workers"
    elif jobqueue or cls == "GatewayCluster":
        return 0, "no scale, adapt or n_workers"
    else:
        return None
    if jobqueue and n > 0:  # whole jobs of `processes` workers each
        processes = kwargs.get("processes")
        return None if processes is None else (-(-n // processes) * processes, f"{what} {n} in jobs of {processes}")
    return n, f"{what} {n}"


def check_local_sizes(local: dict[str, Any], names: dict[str, str] | None = None) -> dict[str, Any]:
    """``local`` (keywords of the default ``LocalCluster``) with its sizes checked.

    ``n_workers`` and ``threads_per_worker`` must be whole numbers of at least
    1 and ``memory_limit`` a positive size or ``"auto"``: distributed takes 0
    as no limit and a negative count as a wait for workers that never come.
    ``names``: how the caller calls each keyword (the command line's options).

    Raises
    ------
    ClusterSpecError
        One line naming the value and what it may be.
    """
    names = names or {}
    for key in ("n_workers", "threads_per_worker"):
        if key in local and not (_is_number(local[key], int) and local[key] >= 1):
            raise ClusterSpecError(f"{names.get(key, key)} {local[key]}: give a whole number of at least 1")
    if "n_workers" in local:
        _check_local_workers(local["n_workers"], names.get("n_workers", "n_workers"))
    out = dict(local)
    if "memory_limit" in out:
        out["memory_limit"] = _memory_limit(out["memory_limit"], names.get("memory_limit", "memory_limit"))
    return out


def local_cluster_options(args) -> dict[str, Any]:
    """``LocalCluster`` keywords from ``--workers``, ``--threads-per-worker`` and ``--memory-limit``, checked.

    Raises
    ------
    ClusterSpecError
        A size that is not one (:func:`check_local_sizes`), or a size given
        with ``--cluster`` / ``--scheduler-address`` / ``--scheduler-file``,
        which name a cluster of its own size.
    """
    given = {option: getattr(args, attr, None) for option, (attr, _) in LOCAL_OPTIONS.items()}
    given = {option: value for option, value in given.items() if value is not None}
    if not given:
        return {}
    target = next((option for option, attr in TARGET_OPTIONS.items() if getattr(args, attr, None) is not None), None)
    if target is not None:
        raise ClusterSpecError(f"{next(iter(given))} sizes the default local cluster; {target} names a cluster of "
                               "its own size (set it there)")
    names = {key: option for option, (_, key) in LOCAL_OPTIONS.items()}
    return check_local_sizes({LOCAL_OPTIONS[option][1]: value for option, value in given.items()}, names)


#: seconds the workers get to take the logging switch before a cluster dsvm started is closed
QUIET_WORKERS_SECONDS = 5.0


def quiet_workers(client, timeout: float = QUIET_WORKERS_SECONDS) -> None:
    """Switch off logging in every worker process of ``client``: for a shutdown of those workers.

    When a cluster shuts down, its workers lose the scheduler while a heartbeat
    or a task's message may be on its way, and distributed logs each such
    loss with a traceback (``CommClosedError``).  They report nothing about the
    finished work.  Waits at most ``timeout`` seconds (a worker whose event
    loop is busy is left as it is).
    """
    def run():
        with contextlib.suppress(Exception):  # a worker or the scheduler already gone: nothing to quiet
            client.run(_stop_logging_unless, os.getpid(), on_error="ignore")

    thread = threading.Thread(target=run, name="dsvm-quiet-workers", daemon=True)
    thread.start()
    thread.join(timeout)


def _stop_logging_unless(pid: int) -> None:
    """Switch logging off in this process, unless it is process ``pid`` (a worker in the client's own process:
    :func:`close_quietly` silences its loggers there for the close only)."""
    if os.getpid() != pid:
        logging.disable(logging.CRITICAL)


@contextlib.contextmanager
def _loggers_silenced(names: tuple[str, ...]) -> Iterator[None]:
    """The loggers ``names`` and their children silent for the duration of the block."""
    chosen = [logging.getLogger(name) for name in names]
    chosen += [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
               if any(name.startswith(f"{n}.") for n in names)]
    levels = [(log, log.level) for log in chosen]
    for log in chosen:
        log.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for log, level in levels:
            log.setLevel(level)


def close_quietly(client, cluster) -> None:
    """Close ``client`` and then ``cluster`` (one dsvm started) without distributed's shutdown noise.

    The workers are told to stop logging first (:func:`quiet_workers`) and the
    cluster libraries' loggers in this process (scheduler, nannies, event loop)
    are silent while both close: the comm errors of processes losing each
    other at a shutdown are no news.  A failure of the close itself is one
    warning line (the command's own result stands).
    """
    if client is not None:
        quiet_workers(client)
    with _loggers_silenced(NOISY_LOGGERS):
        try:
            if client is not None:
                client.close()
        finally:
            try:
                cluster.close()
            except Exception as exc:  # e.g. a batch job that never started fails distributed's own check
                logger.warning("closing the Dask cluster: %s", _describe(exc))
