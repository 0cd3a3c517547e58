"""What a cluster spec may say: one schema of keyword arguments per allowed cluster class.

A spec file is data.  Its ``kwargs`` are checked against the schema of the
class it names: every key must be listed there, with a value of the listed
kind; nested mappings (``scheduler_kwargs``, ``scheduler_options``,
``resources``, ...) are checked the same way, recursively.  Strings are data
(host names, sizes, paths, queue names) and may not contain whitespace or
shell syntax, except in the few job-script arguments below.

Nothing in a spec can name code for the dsvm process, the scheduler or the
workers to import or run: ``preload`` / ``preload_argv`` / ``preload_nanny``
are refused wherever they appear (distributed runs a preload string that
contains a space as Python source), and so are the arguments that name
classes or callables (``worker_class``, ``scheduler_cls``, ``job_cls``,
``plugins``, ``services``, ``custom_cluster_spec``, dask-jobqueue's
``worker_command``, ...)
and positional ``args`` — they are simply not in any schema.

Batch-job and container arguments are the exception, by design: a
dask-jobqueue spec describes a batch script, so ``job_script_prologue``
(shell lines run before the worker starts), ``job_extra_directives`` and
``python`` (the interpreter the job runs) are kept and run on the compute
nodes with your account, as any batch script you submit would; a Kubernetes
or gateway spec names the container ``image`` the workers run.  Treat such a
spec as you would a batch script.  Even there the worker's command line
(``worker_extra_args``) only takes the listed ``dask worker`` options, so no
spec reaches distributed's preload machinery.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ..exceptions import ClusterSpecError

__all__ = ["ClusterSpecError", "SCHEMAS", "ADAPT_SCHEMA", "check_kwargs", "check_adapt"]


class _Invalid(ClusterSpecError):
    """One value is wrong: ``reason`` without the location (for :func:`either`)."""

    def __init__(self, where: str, reason: str):
        super().__init__(f"{where}: {reason}")
        self.reason = reason


# A value check: (value, dotted location) -> None, raising ClusterSpecError.
Check = Callable[[Any, str], None]

MAX_TEXT = 4096
# data strings: host names, addresses, sizes, durations, paths, queue names; `$VAR` / `${VAR}`
# (expanded by the job's shell, e.g. local_directory: $TMPDIR) but no command substitution
_TOKEN = re.compile(r"[A-Za-z0-9_./:~@%+,=\-\[\]{}$]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# keys that make distributed import or run code; refused with this reason wherever they appear
_CODE_KEYS = re.compile(r"preload|plugin|(^|_)(cls|class)$|extensions$|services$|^custom_")


def _fail(where: str, reason: str):
    raise _Invalid(where, reason)


def integer(minimum: int = 0) -> Check:
    def check(v, where):
        if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
            _fail(where, f"expected an integer >= {minimum}, got {v!r}")
    return check


def number(v, where) -> None:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v != v or v < 0:
        _fail(where, f"expected a non-negative number, got {v!r}")


def boolean(v, where) -> None:
    if not isinstance(v, bool):
        _fail(where, f"expected true or false, got {v!r}")


def token(v, where) -> None:
    """A data string: no whitespace, quotes or shell syntax (``$VAR`` allowed, ``$(...)`` not)."""
    if not isinstance(v, str):
        _fail(where, f"expected a string, got {v!r}")
    if len(v) > MAX_TEXT or not _TOKEN.fullmatch(v) or "$(" in v:
        _fail(where, f"{v!r} is not a plain value (no spaces, quotes, ';', '|', '&', '`', '$(' or newlines)")


def text(v, where) -> None:
    """Free text: only where the spec describes lines of a batch script (trusted like one)."""
    if not isinstance(v, str) or len(v) > MAX_TEXT or "\0" in v:
        _fail(where, f"expected a string of at most {MAX_TEXT} characters, got {v!r:.80}")


def either(*checks: Check) -> Check:
    def check(v, where):
        errors = []
        for c in checks:
            try:
                c(v, where)
                return
            except _Invalid as exc:
                errors.append(exc.reason)
        _fail(where, " or ".join(errors))
    return check


def nothing(v, where) -> None:
    if v is not None:
        _fail(where, f"expected null, got {v!r}")


def choice(*options: str) -> Check:
    def check(v, where):
        if v not in options:
            _fail(where, f"expected one of {list(options)}, got {v!r}")
    return check


def list_of(item: Check) -> Check:
    def check(v, where):
        if not isinstance(v, list):
            _fail(where, f"expected a list, got {v!r}")
        for i, x in enumerate(v):
            item(x, f"{where}[{i}]")
    return check


def mapping(schema: Mapping[str, Check]) -> Check:
    def check(v, where):
        check_mapping(v, schema, where)
    return check


def mapping_of(value: Check) -> Check:
    """A mapping with free keys (plain names) and values of one kind, e.g. worker resources."""
    def check(v, where):
        if not isinstance(v, dict):
            _fail(where, f"expected a mapping, got {v!r}")
        for k, x in v.items():
            _check_key(k, where)
            if not k or not _TOKEN.fullmatch(k):
                _fail(where, f"key {k!r} is not a plain name")
            value(x, f"{where}.{k}")
    return check


def _check_key(key: Any, where: str) -> None:
    if not isinstance(key, str):
        _fail(where, f"key {key!r} is not a string")
    if _CODE_KEYS.search(key.lower().replace("-", "_")):
        _fail(f"{where}.{key}", "refused: this argument names code for dsvm, the scheduler or the workers to "
                                "import or run (a cluster spec is data and cannot run code)")


def check_mapping(value: Any, schema: Mapping[str, Check], where: str) -> None:
    """Check every key of ``value`` against ``schema`` (unknown keys are refused)."""
    if not isinstance(value, dict):
        _fail(where, f"expected a mapping, got {value!r}")
    for key, v in value.items():
        _check_key(key, where)
        if key not in schema:
            _fail(where, f"{key!r} is not accepted here; accepted: {sorted(schema)}")
        schema[key](v, f"{where}.{key}")


# --------------------------------------------------------------------------- value kinds
duration = either(number, token)  # 120 or "2 minutes"-free forms like "120s"
memory = either(number, token)  # 4e9, "4GiB", "auto"
optional_address = either(nothing, token)  # null switches a dashboard off
protocol = choice("tcp", "tcp://", "tls", "tls://", "inproc", "inproc://")
security = boolean  # true: temporary self-signed TLS certificates

# `dask worker` options a job script may add (the value after an option is checked as a token)
WORKER_FLAGS = frozenset({
    "--dashboard-address", "--dashboard", "--no-dashboard", "--listen-address", "--contact-address", "--host",
    "--interface", "--protocol", "--worker-port", "--nanny-port", "--nthreads", "--nworkers", "--name",
    "--memory-limit", "--nanny", "--no-nanny", "--local-directory", "--resources", "--death-timeout",
    "--lifetime", "--lifetime-stagger", "--lifetime-restart", "--no-lifetime-restart",
})


def worker_args(v, where) -> None:
    list_of(token)(v, where)
    for i, arg in enumerate(v):
        if arg.startswith("-") and arg.split("=", 1)[0] not in WORKER_FLAGS:
            _fail(f"{where}[{i}]", f"worker option {arg!r} is not accepted; accepted: {sorted(WORKER_FLAGS)}")


def path_of_python(v, where) -> None:
    token(v, where)
    if "$" in v:
        _fail(where, f"expected the path of a Python interpreter, got {v!r}")


# --------------------------------------------------------------------------- schemas
# Nanny/Worker arguments a LocalCluster hands to each worker
_WORKER_KWARGS: dict[str, Check] = {
    "memory_limit": either(nothing, memory),
    "local_directory": token,
    "death_timeout": duration,
    "lifetime": duration,
    "lifetime_stagger": duration,
    "lifetime_restart": boolean,
    "resources": mapping_of(number),
}

_SCHEDULER_KWARGS: dict[str, Check] = {
    "idle_timeout": either(nothing, duration),
    "allowed_failures": integer(0),
    "worker_ttl": either(nothing, duration),
}

LOCAL_CLUSTER: dict[str, Check] = {
    "name": token,
    "n_workers": integer(0),
    "threads_per_worker": integer(1),
    "processes": boolean,
    "host": token,
    "scheduler_port": integer(0),
    "dashboard_address": optional_address,
    "worker_dashboard_address": optional_address,
    "interface": token,
    "protocol": protocol,
    "security": security,
    "scheduler_kwargs": mapping(_SCHEDULER_KWARGS),
    **_WORKER_KWARGS,
}

_JOBQUEUE_SCHEDULER_OPTIONS: dict[str, Check] = {
    "host": token,
    "port": integer(0),
    "interface": token,
    "protocol": protocol,
    "dashboard_address": optional_address,
    **_SCHEDULER_KWARGS,
}

JOBQUEUE: dict[str, Check] = {
    "name": token,
    "n_workers": integer(0),
    "cores": integer(1),
    "memory": token,
    "processes": integer(1),
    "nanny": boolean,
    "interface": token,
    "protocol": protocol,
    "security": security,
    "shared_temp_directory": token,
    "death_timeout": duration,
    "local_directory": token,
    "log_directory": token,
    "job_name": token,
    "queue": token,
    "account": token,
    "walltime": token,
    "scheduler_options": mapping(_JOBQUEUE_SCHEDULER_OPTIONS),
    "worker_extra_args": worker_args,
    # the batch script itself: shell lines and directives, run on the compute nodes (see module docstring)
    "job_script_prologue": list_of(text),
    "job_extra_directives": list_of(text),
    "job_directives_skip": list_of(text),
    "python": path_of_python,
}

_JOBQUEUE_EXTRA: dict[str, dict[str, Check]] = {
    "SLURMCluster": {"job_cpu": integer(1), "job_mem": token},
    "PBSCluster": {"resource_spec": token},
    "MoabCluster": {"resource_spec": token},
    "SGECluster": {"resource_spec": token},
    "LSFCluster": {"ncpus": integer(1), "mem": integer(0), "lsf_units": token, "use_stdin": boolean},
    "OARCluster": {"resource_spec": token, "memory_per_core_property_name": token},
    "HTCondorCluster": {"disk": token},
}

_QUANTITY = either(token, number)
KUBE_CLUSTER: dict[str, Check] = {
    "name": token,
    "namespace": token,
    "image": token,  # the container the workers run (see module docstring)
    "worker_command": token,  # one executable of that image (dask-worker), no options
    "n_workers": integer(0),
    "resources": mapping({"requests": mapping_of(_QUANTITY), "limits": mapping_of(_QUANTITY)}),
    "env": mapping_of(either(text, number, boolean)),
    "port_forward_cluster_ip": boolean,
    "create_mode": choice("CREATE_OR_CONNECT", "CREATE_ONLY", "CONNECT_ONLY"),
    "shutdown_on_close": boolean,
    "idle_timeout": integer(0),
    "resource_timeout": integer(0),
    "scheduler_service_type": choice("ClusterIP", "NodePort", "LoadBalancer"),
    "scheduler_forward_port": integer(0),
    "quiet": boolean,
}

GATEWAY_CLUSTER: dict[str, Check] = {
    "address": token,
    "proxy_address": token,
    "public_address": token,
    "auth": choice("basic", "kerberos", "jupyterhub"),
    "shutdown_on_close": boolean,
}
# any other GatewayCluster keyword is a cluster option defined by the gateway server
_GATEWAY_OPTION = either(token, number, boolean, mapping_of(either(token, number, boolean)))

SCHEMAS: dict[str, dict[str, Check]] = {
    "LocalCluster": LOCAL_CLUSTER,
    **{cls: {**JOBQUEUE, **extra} for cls, extra in _JOBQUEUE_EXTRA.items()},
    "KubeCluster": KUBE_CLUSTER,
    "GatewayCluster": GATEWAY_CLUSTER,
}

ADAPT_SCHEMA: dict[str, Check] = {
    "minimum": integer(0), "maximum": integer(0), "minimum_jobs": integer(0), "maximum_jobs": integer(0),
    "minimum_memory": memory, "maximum_memory": memory, "interval": duration, "wait_count": integer(1),
    "target_duration": duration,
}


def check_kwargs(cls: str, kwargs: Any, where: str) -> None:
    """Refuse any keyword argument of ``cls`` that its schema does not list (see the module docstring)."""
    schema = SCHEMAS[cls]
    if cls == "GatewayCluster":
        if not isinstance(kwargs, dict):
            _fail(f"{where}: kwargs", f"expected a mapping, got {kwargs!r}")
        options = {k: _GATEWAY_OPTION for k in kwargs if k not in schema and isinstance(k, str) and _NAME.fullmatch(k)}
        schema = {**schema, **options}
    check_mapping(kwargs, schema, f"{where}: kwargs")


def check_adapt(adapt: Any, where: str) -> None:
    check_mapping(adapt, ADAPT_SCHEMA, f"{where}: adapt")
