"""Where dsvm runs: the default local cluster, cluster spec files, attaching to schedulers.

A cluster spec is a YAML file in the style of dask-ctl::

    version: 1
    module: dask_jobqueue        # must be in ALLOWED_MODULES
    class: SLURMCluster
    args: []
    kwargs: {cores: 2, memory: 4GiB, walltime: "00:30:00"}
    scale: 2                     # or: adapt: {minimum: 1, maximum: 8}
    wait_for_workers: 2          # optional: block until this many workers joined
    timeout: 120                 # seconds to wait for them

Only classes from :data:`ALLOWED_MODULES` are ever imported, and their
keyword arguments are checked against one schema per class
(:mod:`dsvm.app._cluster_schema`), so a spec file cannot make dsvm, the scheduler
or the workers import or run code (no ``preload``, no class names, no
positional ``args``).  Every listener that a spec does not place explicitly
(scheduler, dashboards, job-queue workers) is bound to 127.0.0.1
(:func:`local_listeners`): the spec decides where it listens, never a library
default.  Without a spec, an embedded ``distributed.LocalCluster`` sized to
this machine is started, listening on 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import errno
import importlib
import json
import logging
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..config import get as config_get
from ..exceptions import ClusterSpecError, SchedulerUnreachableError
from ..user_files import read_user_file
from ._cluster_lifecycle import (
    NOISY_LOGGERS,
    check_local_sizes,
    check_spec_workers,
    close_quietly,
    job_failures,
    local_cluster_options,
    quiet_workers,
    wait_for_workers,
)
from ._cluster_schema import SCHEMAS, check_adapt, check_kwargs
from ._yaml_files import read_yaml_file

logger = logging.getLogger(__name__)

ALLOWED_MODULES = {
    "distributed": {"LocalCluster"},
    "dask.distributed": {"LocalCluster"},
    "dask_jobqueue": {"SLURMCluster", "PBSCluster", "SGECluster", "LSFCluster", "OARCluster", "HTCondorCluster", "MoabCluster"},
    "dask_kubernetes.operator": {"KubeCluster"},
    "dask_gateway": {"GatewayCluster"},
}
EXTRAS = {
    "dask_jobqueue": "dsvm[slurm]",
    "dask_kubernetes.operator": "dsvm[kubernetes]",
    "dask_gateway": "dsvm[gateway]",
}
SPEC_KEYS = {"version", "module", "class", "args", "kwargs", "scale", "adapt", "wait_for_workers", "timeout", "name", "description"}


__all__ = ["ClusterSpecError", "SchedulerUnreachableError", "connect", "load_cluster_spec", "validate_cluster_spec",
           "make_cluster", "local_listeners", "scheduler_file_address", "check_scheduler_reachable",
           "connect_from_args", "NOISY_LOGGERS", "quiet_noisy_loggers", "check_local_sizes", "local_cluster_options",
           "quiet_workers", "close_quietly"]
LOCALHOST = "127.0.0.1"
JOBQUEUE_CLASSES = ALLOWED_MODULES["dask_jobqueue"]
assert set().union(*ALLOWED_MODULES.values()) <= set(SCHEMAS)


def load_cluster_spec(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a cluster spec file (see the module docstring)."""
    return validate_cluster_spec(read_yaml_file(path, ClusterSpecError, "cluster spec"), str(Path(path)))


def validate_cluster_spec(spec: Any, where: str = "cluster spec") -> dict[str, Any]:
    """Check the structure of a spec mapping; return it with defaults filled in."""
    if not isinstance(spec, dict):
        raise ClusterSpecError(f"{where}: expected a mapping with 'module' and 'class'")
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise ClusterSpecError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(SPEC_KEYS)}")
    if spec.get("version", 1) != 1:
        raise ClusterSpecError(f"{where}: version {spec.get('version')!r} is not supported (use 1)")
    _check_cluster_class(spec, where)
    args, kwargs = _cluster_arguments(spec, where)
    _check_scaling(spec, where)
    out = dict(spec)
    out["args"], out["kwargs"] = args, kwargs
    check_spec_workers(out, where)
    return out


def _check_cluster_class(spec: dict[str, Any], where: str) -> None:
    """The spec's ``module`` and ``class``: strings naming a class of :data:`ALLOWED_MODULES`."""
    module, cls = spec.get("module"), spec.get("class")
    if not isinstance(module, str) or not isinstance(cls, str):
        raise ClusterSpecError(f"{where}: 'module' and 'class' must be strings, e.g. module: dask_jobqueue, class: SLURMCluster")
    if module not in ALLOWED_MODULES:
        raise ClusterSpecError(f"{where}: module {module!r} is not allowed; allowed modules: {sorted(ALLOWED_MODULES)}")
    if cls not in ALLOWED_MODULES[module]:
        raise ClusterSpecError(f"{where}: class {cls!r} is not allowed from {module}; allowed: {sorted(ALLOWED_MODULES[module])}")


def _cluster_arguments(spec: dict[str, Any], where: str) -> tuple[list, dict[str, Any]]:
    """The spec's ``args`` (none accepted) and ``kwargs`` (checked against its class's schema), empty if absent."""
    args, kwargs = spec.get("args", []) or [], spec.get("kwargs", {}) or {}
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise ClusterSpecError(f"{where}: 'args' must be a list and 'kwargs' a mapping")
    if args:  # positional arguments would bypass the keyword schema
        raise ClusterSpecError(f"{where}: positional 'args' are not accepted; name each argument under 'kwargs'")
    check_kwargs(spec["class"], kwargs, where)
    return args, kwargs


def _check_scaling(spec: dict[str, Any], where: str) -> None:
    """The spec's ``scale`` or ``adapt``, ``wait_for_workers`` and ``timeout``."""
    if "scale" in spec and "adapt" in spec:
        raise ClusterSpecError(f"{where}: give either 'scale' or 'adapt', not both")
    if "scale" in spec and not (_is_number(spec["scale"], int) and spec["scale"] >= 0):
        raise ClusterSpecError(f"{where}: 'scale' must be a non-negative integer")
    for key in ("wait_for_workers", "timeout"):
        if key in spec and not (_is_number(spec[key]) and spec[key] >= 0):
            raise ClusterSpecError(f"{where}: {key!r} must be a non-negative number")
    if "adapt" in spec and not isinstance(spec["adapt"], dict):
        raise ClusterSpecError(f"{where}: 'adapt' must be a mapping such as {{minimum: 1, maximum: 8}}")
    if "adapt" in spec:
        check_adapt(spec["adapt"], where)


def _is_number(x: Any, types=(int, float)) -> bool:
    return isinstance(x, types) and not isinstance(x, bool)


def cluster_class(spec: dict[str, Any]):
    """Import the (allow-listed) cluster class named by a validated spec."""
    module = spec["module"]
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        hint = f"; install it with pip install '{EXTRAS[module]}'" if module in EXTRAS else ""
        raise ClusterSpecError(f"cannot import {module} ({exc}){hint}") from None
    try:
        return getattr(mod, spec["class"])
    except AttributeError:
        version = getattr(mod, "__version__", "?")
        raise ClusterSpecError(f"{module} {version} has no class {spec['class']}; check the spec's 'module' and 'class'") from None


def _first_line(exc: BaseException) -> str:
    cause = exc.__cause__ or exc  # distributed wraps start-up errors: "Nanny failed to start." from TypeError
    text = " ".join(str(cause).split())
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__


def _local_address(address: Any) -> Any:
    """``":8787"`` or ``8787`` (a port without a host) as ``"127.0.0.1:8787"``; anything else unchanged."""
    if isinstance(address, int) and not isinstance(address, bool):
        return f"{LOCALHOST}:{address}"
    if isinstance(address, str) and (address.startswith(":") or address.isdigit()):
        return f"{LOCALHOST}:{address.lstrip(':')}"
    return address


def local_listeners(cls: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with every listener the spec does not place explicitly bound to 127.0.0.1.

    ``LocalCluster``: scheduler and workers (unless ``host`` or ``interface``
    is given) and the dashboard (unless ``dashboard_address`` names a host;
    a bare port gets 127.0.0.1).  dask-jobqueue classes: the scheduler and
    its dashboard in this process the same way (through
    ``scheduler_options``), and in the job script the workers (``--host``,
    unless ``interface`` or a worker address option is given) and their
    dashboards.  Kubernetes and gateway clusters listen inside their own
    network and are left as they are.
    """
    kw = copy.deepcopy(kwargs)
    if cls == "LocalCluster":
        if "host" not in kw and "interface" not in kw:
            kw["host"] = LOCALHOST
        kw["dashboard_address"] = _local_address(kw.get("dashboard_address", ":0"))
        kw["worker_dashboard_address"] = _local_address(kw.get("worker_dashboard_address"))
    elif cls in JOBQUEUE_CLASSES:
        options = kw.setdefault("scheduler_options", {})
        if not {"host", "interface"} & set(options) and "interface" not in kw:
            options["host"] = LOCALHOST
        options["dashboard_address"] = _local_address(options.get("dashboard_address", ":0"))
        args = list(kw.get("worker_extra_args", []))
        flags = {a.split("=", 1)[0] for a in args if a.startswith("-")}
        for i, a in enumerate(args[:-1]):
            if a == "--dashboard-address":
                args[i + 1] = _local_address(args[i + 1])
        if not flags & {"--dashboard-address", "--no-dashboard"}:
            args += ["--dashboard-address", f"{LOCALHOST}:0"]
        if "interface" not in kw and not flags & {"--host", "--listen-address", "--interface"}:
            args += ["--host", LOCALHOST]
        kw["worker_extra_args"] = args
    return kw


def make_cluster(spec: dict[str, Any], where: str = "cluster spec"):
    """Construct the cluster described by a validated spec and apply scale/adapt."""
    cls = cluster_class(spec)
    kwargs = local_listeners(spec["class"], spec["kwargs"])
    try:
        cluster = cls(**kwargs)
    except (TypeError, ValueError, RuntimeError, OSError) as exc:
        raise ClusterSpecError(f"{where}: cannot start {spec['module']}.{spec['class']}: {_first_line(exc)}") from exc
    try:
        if "scale" in spec:
            cluster.scale(spec["scale"])
        elif "adapt" in spec:
            cluster.adapt(**spec["adapt"])
    except BaseException as exc:
        cluster.close()
        if isinstance(exc, (TypeError, ValueError)):
            raise ClusterSpecError(f"{where}: 'scale'/'adapt' rejected by {spec['class']}: {_first_line(exc)}") from exc
        raise
    return cluster


# glibc malloc settings for worker processes.  distributed sets
# MALLOC_TRIM_THRESHOLD_=65536 so that workers hand freed memory back to the OS;
# setting it also switches off glibc's adaptive mmap threshold, so every
# temporary above 128 KiB is mmap-ed and page-faulted afresh, which slows a
# fused Newton pass over a block severalfold.  With the values below
# temporaries under 16 MiB reuse the heap; feature blocks, larger, are still
# mmap-ed and returned when freed.
WORKER_MALLOC_ENV = {"MALLOC_TRIM_THRESHOLD_": str(16 * 2**20), "MALLOC_MMAP_THRESHOLD_": str(16 * 2**20)}

# numpy asks the kernel for transparent huge pages (madvise) on every array of
# 4 MiB or more.  Where the kernel's THP defrag setting is "madvise" (a common
# default), each such page fault may stop to compact memory first, and memory
# is fragmented exactly when dsvm runs: data streamed from disk fills the page
# cache, so first touching new blocks can cost several times the work itself
# (timings in the documentation's performance page).  The GEMMs gain nothing
# from huge pages: they run on 8 MiB slabs, as fast on 4 KiB pages.
WORKER_NUMPY_ENV = {"NUMPY_MADVISE_HUGEPAGE": "0"}


def worker_environment_config() -> dict[str, str]:
    """``dask.config`` overrides that give the worker processes dsvm starts :data:`WORKER_MALLOC_ENV` and
    :data:`WORKER_NUMPY_ENV`."""
    env = {**WORKER_MALLOC_ENV, **WORKER_NUMPY_ENV}
    return {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in env.items()}


def local_cluster_kwargs(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments of the default ``LocalCluster`` for this machine.

    One worker process per 4 cores (at least one), the cores shared out as
    threads: numpy's kernels release the GIL, so threads in one process share
    the feature blocks without copies, while separate processes on a small
    machine only add serialisation.  Memory is split evenly.  Everything
    listens on 127.0.0.1.
    """
    cores = os.cpu_count() or 1
    n_workers = max(1, cores // 4)
    kwargs: dict[str, Any] = {
        "n_workers": n_workers,
        "threads_per_worker": max(1, cores // n_workers),
        "processes": True,
        "host": "127.0.0.1",
        "dashboard_address": "127.0.0.1:0",
    }
    kwargs.update(overrides)
    return kwargs


DEFAULT_SCHEDULER_PORT = 8786
# A refused port or an unknown host fails the first short attempt at once; only a slow or silent
# host gets the rest of dsvm.connect-timeout.
FIRST_ATTEMPT_SECONDS = 1.0


MAX_SCHEDULER_FILE_BYTES = 2**20  # a scheduler file is a few hundred bytes of JSON


def scheduler_file_address(path: str | os.PathLike) -> str:
    """The scheduler address written in a scheduler file (``dask scheduler --scheduler-file``): a regular
    file (a FIFO or a device is refused at once, :mod:`dsvm.user_files`) of at most 1 MiB."""
    try:
        info = json.loads(read_user_file(path, "scheduler file", SchedulerUnreachableError, MAX_SCHEDULER_FILE_BYTES))
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "scheduler file not found", str(path)) from None
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested without end
        raise SchedulerUnreachableError(f"scheduler file {path} is not a JSON scheduler file") from None
    address = info.get("address") if isinstance(info, dict) else None
    if not isinstance(address, str) or not address:
        raise SchedulerUnreachableError(f"scheduler file {path} names no scheduler address")
    return address


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, outermost first."""
    chain = [exc]
    while (exc.__cause__ or exc.__context__) is not None and len(chain) < 20:
        exc = exc.__cause__ or exc.__context__
        chain.append(exc)
    return chain


def _connect_failure(exc: BaseException) -> str:
    """Why a connection failed, in a few words (distributed wraps the socket's error)."""
    chain = _chain(exc)
    for kind, words in ((ConnectionRefusedError, "connection refused"), (socket.gaierror, "unknown host"),
                        (TimeoutError, "no answer")):
        if any(isinstance(e, kind) for e in chain):
            return words
    text = " ".join(str(chain[-1]).split())
    return text or type(chain[-1]).__name__


async def _handshake(address: str, timeout: float) -> None:
    """Connect to ``address`` and complete distributed's handshake (which has no timeout of its own)."""
    from distributed.comm import connect as comm_connect
    from distributed.security import Security

    # the client's TLS settings of dask.config (distributed.comm.tls.*), as the Client will use them
    connection_args = Security().get_connection_args("client")

    async def attempt():
        comm = await comm_connect(address, timeout=timeout, **connection_args)
        await comm.close()

    await asyncio.wait_for(attempt(), timeout)


#: the schemes dsvm attaches over (distributed's others: inproc:// lives inside one process, ucx:// needs a
#: back-end dsvm does not install)
SCHEMES = ("tcp", "tls")
#: the most bytes a Dask scheduler's first message (its handshake, a few hundred bytes) may announce
MAX_GREETING_BYTES = 2**20


def check_scheduler_reachable(address: str, timeout: float, where: str = "") -> None:
    """Fail with one line, within ``timeout`` seconds, when no scheduler answers at ``address``.

    A refused port or an unknown host fails within
    :data:`FIRST_ATTEMPT_SECONDS`; a host that does not answer, or a server
    that never completes distributed's handshake, after ``timeout``; a
    server that answers in another protocol at once (its first message is
    read with a bound, :data:`MAX_GREETING_BYTES`, before distributed reads
    it whole).  Only ``tcp://`` and ``tls://`` addresses are accepted.
    ``where``: how the address was given (``" (from scheduler file s.json)"``).
    Skipped inside a running event loop (the client then bounds the connect).
    """
    scheme, host, port = _scheduler_location(address, where)
    try:
        asyncio.get_running_loop()
        return
    except RuntimeError:
        pass
    started = time.monotonic()
    first = min(FIRST_ATTEMPT_SECONDS, timeout)
    _check_greeting(address, where, (scheme, host, port), first, started)
    try:
        _run_handshake(address, where, first)
        return
    except SchedulerUnreachableError:  # an OSError, but already the answer
        raise
    except (TimeoutError, OSError) as exc:
        if any(isinstance(e, (ConnectionRefusedError, socket.gaierror)) for e in _chain(exc)) or timeout <= first:
            raise _unreachable(address, where, exc, started) from None
    try:
        _run_handshake(address, where, timeout - first)
    except SchedulerUnreachableError:
        raise
    except (TimeoutError, OSError) as exc:
        raise _unreachable(address, where, exc, started) from None


def _scheduler_location(address: str, where: str) -> tuple[str, str, int]:
    """The scheme, host and port of a scheduler ``address`` dsvm can attach to (``tls`` only with a client
    certificate configured)."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        host, port = parse_host_port(location, default_port=DEFAULT_SCHEDULER_PORT)
    except ValueError as exc:
        raise SchedulerUnreachableError(f"{address!r}{where} is not a scheduler address ({exc})") from None
    if scheme not in SCHEMES:
        raise SchedulerUnreachableError(f"{address}{where}: dsvm attaches to a Dask scheduler over "
                                        f"{' or '.join(f'{s}://' for s in SCHEMES)}, not {scheme}://")
    if scheme == "tls" and not _client_tls_configured():
        raise SchedulerUnreachableError(
            f"the Dask scheduler at {address}{where} speaks TLS and this process has no certificate for it: set "
            "distributed.comm.tls.ca-file, .client.cert and .client.key (DASK_DISTRIBUTED__COMM__TLS__CA_FILE, ...)")
    return scheme, host, port


def _check_greeting(address: str, where: str, location: tuple[str, str, int], first: float, started: float) -> None:
    """Within ``first`` seconds, over a plain socket: a refused port or an unknown host is unreachable, and a
    first message no Dask scheduler sends is another protocol; silence is left to the handshake."""
    # A plain socket first: distributed's connect retries a refused port until its timeout, and on a loaded
    # machine its first attempt may not even get to the refusal within ``first``.
    try:
        greeting = _probe(*location, first)
    except (ConnectionRefusedError, socket.gaierror) as exc:
        raise _unreachable(address, where, exc, started) from None
    except OSError:  # no answer yet: the handshake waits for it, up to ``timeout``
        return
    if greeting is not None and not 0 < greeting <= MAX_GREETING_BYTES:
        raise _not_dask(address, where)


def _run_handshake(address: str, where: str, timeout: float) -> None:
    """:func:`_handshake`; a reply distributed cannot read (an impossible frame size, bytes that are not its
    messages) is one line saying that the server does not speak Dask's protocol."""
    try:
        asyncio.run(_handshake(address, timeout))
    except (TimeoutError, OSError):
        raise
    except Exception:  # whatever distributed's decoding raises on a stranger's bytes (MemoryError included)
        raise _not_dask(address, where) from None


def _not_dask(address: str, where: str) -> SchedulerUnreachableError:
    return SchedulerUnreachableError(f"the server at {address}{where} does not speak Dask's protocol: it is not a "
                                     "Dask scheduler (check the host and the port)")


def _probe(scheme: str, host: str, port: int, timeout: float) -> int | None:
    """Open a connection to ``host:port`` (for ``tls`` with the TLS handshake done, so that the scheduler does
    not log a failed handshake), and return the size its first message announces (distributed's first 8 bytes:
    the bytes of the frames that follow); None when the server says nothing within ``timeout`` or hangs up."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        if scheme == "tls":
            from distributed.security import Security

            context = Security().get_connection_args("client")["ssl_context"]
            sock = context.wrap_socket(sock, server_hostname=host)
        head = b""
        with contextlib.suppress(OSError):  # silent, or gone: the handshake tells
            while len(head) < 8:
                part = sock.recv(8 - len(head))
                if not part:
                    break
                head += part
    finally:
        sock.close()
    return struct.unpack("Q", head)[0] if len(head) == 8 else None


def _client_tls_configured() -> bool:
    """Whether dask.config gives this process a client certificate and a CA (``distributed.comm.tls.*``)."""
    from distributed.security import Security

    tls = Security().get_tls_config_for_role("client")
    return bool(tls.get("ca_file") and tls.get("cert"))


def _unreachable(address: str, where: str, exc: BaseException, started: float) -> SchedulerUnreachableError:
    waited = time.monotonic() - started
    after = f" (waited {waited:.0f} s)" if waited >= 1 else ""
    return SchedulerUnreachableError(f"cannot reach the Dask scheduler at {address}{where}: "
                                     f"{_connect_failure(exc)}{after}")


def _attach(address: str, where: str = ""):
    """A client of the running scheduler at ``address``, or one line saying why there is none."""
    from distributed import Client

    timeout = float(config_get("connect-timeout"))
    check_scheduler_reachable(address, timeout, where)
    started = time.monotonic()
    try:
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError) as exc:
        raise _unreachable(address, where, exc, started) from None


@contextlib.contextmanager
def connect(
    cluster_spec: str | os.PathLike | dict | None = None,
    scheduler_address: str | None = None,
    scheduler_file: str | os.PathLike | None = None,
    local: dict[str, Any] | None = None,
) -> Iterator[Any]:
    """A ``distributed.Client`` for the duration of a ``with`` block.

    Exactly one of ``cluster_spec``, ``scheduler_address`` or
    ``scheduler_file`` may be given; with none, the default local cluster is
    started (``local`` overrides its keyword arguments, checked by
    :func:`check_local_sizes`).  Clusters started here are closed on exit,
    quietly (:func:`close_quietly`); attached schedulers are left running.
    """
    given = [x is not None for x in (cluster_spec, scheduler_address, scheduler_file)]
    if sum(given) > 1:
        raise ValueError("give at most one of --cluster, --scheduler-address and --scheduler-file")
    if scheduler_address is None and scheduler_file is None:
        with _started_cluster(cluster_spec, local) as client:
            yield client
        return
    if scheduler_address is not None:
        client = _attach(scheduler_address)
        logger.info("attached to scheduler %s", scheduler_address)
    else:
        address = scheduler_file_address(scheduler_file)
        client = _attach(address, f" (from scheduler file {scheduler_file})")
        logger.info("attached to scheduler %s from %s", address, scheduler_file)
    try:
        yield client
    finally:
        client.close()


@contextlib.contextmanager
def _started_cluster(cluster_spec: str | os.PathLike | dict | None, local: dict[str, Any] | None) -> Iterator[Any]:
    """A client of a cluster started here (the default local one, or a spec's), waited for as the spec says;
    its worker processes show warnings as one line and leave a failed task to the client
    (:class:`~dsvm.app._worker_logs.WorkerLogs`)."""
    import dask.config
    from distributed import Client, LocalCluster

    from ._worker_logs import WorkerLogs  # imports distributed

    spec: dict[str, Any] = {}
    where = "cluster spec"
    if cluster_spec is None:
        local_kwargs = local_cluster_kwargs(**check_local_sizes(local or {}))
    else:
        where = "cluster spec" if isinstance(cluster_spec, dict) else str(cluster_spec)
        spec = cluster_spec if isinstance(cluster_spec, dict) else load_cluster_spec(cluster_spec)
        spec = validate_cluster_spec(spec, where)
    # a batch system's refusal of a worker job is raised in the event loop: one line, kept for the wait
    with job_failures(waiting=bool(spec.get("wait_for_workers"))) as failures:
        with dask.config.set(worker_environment_config()):
            cluster = LocalCluster(**local_kwargs) if cluster_spec is None else make_cluster(spec, where)
        client = None
        try:
            client = Client(cluster)
            client.register_plugin(WorkerLogs(logging.getLogger().getEffectiveLevel(), os.getpid()))
            if spec.get("wait_for_workers"):
                wait_for_workers(client, cluster, int(spec["wait_for_workers"]), spec.get("timeout", 300), where,
                                 failures, is_slurm=spec["class"] == "SLURMCluster")
            link = getattr(client, "dashboard_link", None)
            if link:
                logger.info("Dask dashboard: %s", link)
            yield client
        finally:
            failures.close_failed_jobs()
            close_quietly(client, cluster)


def quiet_noisy_loggers(level: int) -> None:
    """Show the cluster libraries' log records from WARNING up (or from ``level`` if higher)."""
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))


def connect_from_args(args) -> contextlib.AbstractContextManager:
    """:func:`connect` as the command line's cluster options say (``--cluster``, ``--scheduler-address``,
    ``--scheduler-file``, and ``--workers`` / ``--threads-per-worker`` / ``--memory-limit`` of the
    default local cluster)."""
    local = local_cluster_options(args)
    quiet_noisy_loggers(logging.getLogger().level)
    return connect(getattr(args, "cluster", None), getattr(args, "scheduler_address", None),
                   getattr(args, "scheduler_file", None), local=local)
