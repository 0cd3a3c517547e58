"""Cluster spec files: the shipped ones in cluster/ load and describe what they claim,
bad specs fail with one clear line (library and CLI), everything dsvm starts listens on
127.0.0.1.  Kubernetes and dask-gateway specs are checked offline only."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from helpers import run_dsvm

from dsvm.app.cluster import ClusterSpecError, connect, load_cluster_spec, validate_cluster_spec
from dsvm.blocks import scheduler_workers

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted((REPO / "cluster").glob("*.yaml"))
SHIPPED = {"local", "slurm", "pbs", "kubernetes", "gateway"}


def _write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _host(address: str) -> str:
    return address.split("://")[-1].rsplit(":", 1)[0]


# --------------------------------------------------------------------------- shipped specs


def test_all_documented_specs_are_shipped():
    assert {p.stem for p in SPECS} >= SHIPPED
    readme = (REPO / "cluster" / "README.md").read_text()
    for name in SHIPPED:
        assert f"cluster/{name}.yaml" in readme, f"cluster/README.md does not describe {name}.yaml"
    assert (REPO / "cluster" / "slurm-batch.sh").exists()


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_shipped_spec_loads(path):
    spec = load_cluster_spec(path)
    assert spec["module"] and spec["class"]
    assert isinstance(spec["kwargs"], dict)
    assert not ("scale" in spec and "adapt" in spec)
    assert spec.get("description"), f"{path.name}: add a one-line description"


def test_local_spec_starts_on_localhost_only():
    """cluster/local.yaml really starts, and scheduler, workers and dashboard are on 127.0.0.1."""
    with connect(REPO / "cluster" / "local.yaml") as client:
        info = client.scheduler_info()
        workers = scheduler_workers(client)
        assert _host(info["address"]) == "127.0.0.1"
        assert len(workers) >= 1
        assert all(_host(w) == "127.0.0.1" for w in workers)
        assert client.dashboard_link.startswith("http://127.0.0.1:")
        assert client.submit(sum, [1, 2, 3]).result() == 6


def test_default_local_cluster_listens_on_localhost():
    with connect(local={"n_workers": 1, "threads_per_worker": 1}) as client:
        info = client.scheduler_info()
        assert _host(info["address"]) == "127.0.0.1"
        assert [_host(w) for w in scheduler_workers(client)] == ["127.0.0.1"]
        assert client.dashboard_link.startswith("http://127.0.0.1:")


def _worker_settings():
    import os

    import numpy as np

    return ({k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "NUMPY_MADVISE_HUGEPAGE")},
            bool(np._core.multiarray._get_madvise_hugepage()))


def test_default_local_cluster_workers_get_the_malloc_and_numpy_settings(monkeypatch):
    """Workers dsvm starts reuse heap memory for temporaries and ask for no transparent huge pages (a page
    fault of such a page may stop to compact memory: seconds per fit, see WORKER_NUMPY_ENV)."""
    from dsvm.app.cluster import WORKER_MALLOC_ENV, WORKER_NUMPY_ENV

    # values already in this process's environment win over the config (distributed's rule), and a
    # cluster started earlier in the session leaves its own there
    for name in (*WORKER_MALLOC_ENV, *WORKER_NUMPY_ENV):
        monkeypatch.delenv(name, raising=False)
    with connect(local={"n_workers": 1, "threads_per_worker": 1}) as client:
        ((env, hugepages),) = client.run(_worker_settings).values()
    assert env == {**WORKER_MALLOC_ENV, **WORKER_NUMPY_ENV}
    assert WORKER_NUMPY_ENV == {"NUMPY_MADVISE_HUGEPAGE": "0"} and hugepages is False


@pytest.mark.parametrize("name", ["slurm", "pbs"])
def test_batch_specs_give_workers_the_same_settings(name):
    from dsvm.app.cluster import WORKER_MALLOC_ENV, WORKER_NUMPY_ENV

    prologue = load_cluster_spec(REPO / "cluster" / f"{name}.yaml")["kwargs"]["job_script_prologue"]
    assert sorted(prologue) == sorted(f"export {k}={v}" for k, v in {**WORKER_MALLOC_ENV, **WORKER_NUMPY_ENV}.items())


def _jobqueue_cluster(name, tmp_path, monkeypatch):
    """Construct a dask-jobqueue cluster from a shipped spec without submitting any job."""
    pytest.importorskip("dask_jobqueue")
    from dsvm.app.cluster import cluster_class

    monkeypatch.chdir(tmp_path)  # log_directory / shared_temp_directory are relative or ~
    monkeypatch.setenv("HOME", str(tmp_path))
    spec = load_cluster_spec(REPO / "cluster" / f"{name}.yaml")
    return spec, cluster_class(spec)(*spec["args"], **spec["kwargs"])


def test_slurm_spec_job_script(tmp_path, monkeypatch):
    spec, cluster = _jobqueue_cluster("slurm", tmp_path, monkeypatch)
    try:
        script = cluster.job_script()
        assert _host(cluster.scheduler_address) == "127.0.0.1"
        assert cluster.dashboard_link.startswith("http://127.0.0.1:")
        kw = spec["kwargs"]
        assert f"#SBATCH -J {kw['job_name']}" in script
        assert f"#SBATCH -p {kw['queue']}" in script
        assert f"#SBATCH --cpus-per-task={kw['cores']}" in script
        assert "#SBATCH --mem=" in script and f"#SBATCH -t {kw['walltime']}" in script
        assert "--interface lo" in script and "--dashboard-address 127.0.0.1:0" in script
        assert sys.executable in script  # workers run this virtualenv's python
        assert len(cluster.workers) == 0  # nothing submitted before scale()
        assert spec["scale"] == 1 and spec["wait_for_workers"] == 1
    finally:
        cluster.close()


def test_pbs_spec_job_script(tmp_path, monkeypatch):
    spec, cluster = _jobqueue_cluster("pbs", tmp_path, monkeypatch)
    try:
        script = cluster.job_script()
        kw = spec["kwargs"]
        assert f"#PBS -N {kw['job_name']}" in script
        assert f"#PBS -q {kw['queue']}" in script
        assert f"#PBS -l {kw['resource_spec']}" in script
        assert f"#PBS -l walltime={kw['walltime']}" in script
        assert cluster.scheduler_address.startswith("tls://")  # security: true
        assert "--tls-ca-file" in script and "--dashboard-address 127.0.0.1:0" in script
        assert set(spec["adapt"]) <= set(inspect.signature(cluster.adapt).parameters)
    finally:
        cluster.close()


def test_kubernetes_spec_offline():
    """Build the operator's DaskCluster resource from the spec without a Kubernetes cluster."""
    operator = pytest.importorskip("dask_kubernetes.operator")
    spec = load_cluster_spec(REPO / "cluster" / "kubernetes.yaml")
    assert (spec["module"], spec["class"]) == ("dask_kubernetes.operator", "KubeCluster")
    kwargs = spec["kwargs"]
    named = {n for n, p in inspect.signature(operator.KubeCluster.__init__).parameters.items()
             if p.kind is not inspect.Parameter.VAR_KEYWORD}
    assert set(kwargs) <= named, f"unknown KubeCluster arguments: {sorted(set(kwargs) - named)}"
    inspect.signature(operator.KubeCluster).bind(*spec["args"], **kwargs)
    make_params = set(inspect.signature(operator.make_cluster_spec).parameters)
    resource = operator.make_cluster_spec(**{k: v for k, v in kwargs.items() if k in make_params})
    assert resource["kind"] == "DaskCluster"
    assert resource["metadata"]["name"] == kwargs["name"]
    worker = resource["spec"]["worker"]
    assert worker["replicas"] == kwargs["n_workers"]
    container = worker["spec"]["containers"][0]
    assert container["image"] == kwargs["image"]
    assert container["resources"] == kwargs["resources"]
    assert resource["spec"]["scheduler"]["service"]["type"] == kwargs["scheduler_service_type"]
    assert spec["wait_for_workers"] <= kwargs["n_workers"]


def test_gateway_spec_offline(monkeypatch):
    """Check the GatewayCluster arguments and cluster options without a gateway server."""
    dask_gateway = pytest.importorskip("dask_gateway")
    import dask
    from dask_gateway.options import Float, Integer, Options, String

    spec = load_cluster_spec(REPO / "cluster" / "gateway.yaml")
    assert (spec["module"], spec["class"]) == ("dask_gateway", "GatewayCluster")
    kwargs = spec["kwargs"]
    inspect.signature(dask_gateway.GatewayCluster).bind(*spec["args"], **kwargs)
    gateway_params = set(inspect.signature(dask_gateway.Gateway).parameters) - {"asynchronous", "loop"}
    cluster_params = set(inspect.signature(dask_gateway.GatewayCluster).parameters) - {"kwargs"}
    # what a daskhub-style server sees: the remaining kwargs are cluster options
    options = {k: v for k, v in kwargs.items() if k not in cluster_params}
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "offline-test-token")

    async def make_gateway():  # asynchronous: no event loop thread, nothing to tear down
        async with dask_gateway.Gateway(asynchronous=True, **{k: v for k, v in kwargs.items() if k in gateway_params}) as g:
            return g.address, type(g.auth).__name__

    with dask.config.set({"gateway.address": "http://127.0.0.1:9", "gateway.auth.type": "jupyterhub"}):
        assert asyncio.run(make_gateway()) == ("http://127.0.0.1:9", "JupyterHubAuth")
    server_side = Options(Integer("worker_cores", 1, min=1, max=64), Float("worker_memory", 2, min=1, max=512),
                          String("image", "ghcr.io/dask/dask:latest"))
    for key, value in options.items():
        server_side[key] = value  # raises on an unknown option or a bad type
    assert set(spec["adapt"]) <= set(inspect.signature(dask_gateway.GatewayCluster.adapt).parameters)


# --------------------------------------------------------------------------- bad specs (library)


@pytest.mark.parametrize("module,cls", [("os", "system"), ("subprocess", "Popen"), ("builtins", "eval"),
                                        ("distributed", "Client"), ("dask_jobqueue", "JobQueueCluster")])
def test_module_or_class_outside_allowlist(tmp_path, module, cls):
    path = _write(tmp_path, f"module: {module}\nclass: {cls}\nargs: [echo hacked]\n")
    with pytest.raises(ClusterSpecError, match="not allowed") as info:
        load_cluster_spec(path)
    assert str(path) in str(info.value)
    if module in ("os", "subprocess", "builtins"):
        assert "allowed modules" in str(info.value)


@pytest.mark.parametrize("text,match", [
    ("module: distributed\nclass: LocalCluster\nworkers: 2\n", r"unknown keys \['workers'\]"),
    ("module: distributed\nclass: LocalCluster\nscale: 2\nadapt: {minimum: 1, maximum: 4}\n", "either 'scale' or 'adapt'"),
    ("module: distributed\nclass: LocalCluster\nscale: -1\n", "non-negative integer"),
    ("module: distributed\nclass: LocalCluster\nadapt: 4\n", "'adapt' must be a mapping"),
    ("module: distributed\nclass: LocalCluster\nkwargs: [1, 2]\n", "'kwargs' a mapping"),
    ("module: distributed\nclass: LocalCluster\nargs: {a: 1}\n", "'args' must be a list"),
    ("module: distributed\nclass: LocalCluster\nversion: 2\n", "version 2 is not supported"),
    ("class: LocalCluster\n", "module"),
    ("- module: distributed\n", "expected a mapping"),
    ("", "expected a mapping"),
    ("module: distributed\nclass: [LocalCluster\n", "not valid YAML"),
    ("module: distributed\n\tclass: LocalCluster\n", "not valid YAML"),
])
def test_bad_spec_raises_clear_error(tmp_path, text, match):
    path = _write(tmp_path, text)
    with pytest.raises(ClusterSpecError, match=match) as info:
        load_cluster_spec(path)
    assert str(path) in str(info.value)


def test_missing_spec_file(tmp_path):
    with pytest.raises(ClusterSpecError, match="not found"):
        load_cluster_spec(tmp_path / "nope.yaml")


def test_validate_fills_defaults():
    spec = validate_cluster_spec({"module": "distributed", "class": "LocalCluster", "args": None, "kwargs": None})
    assert spec["args"] == [] and spec["kwargs"] == {}


def test_non_string_module_is_a_spec_error(tmp_path):
    with pytest.raises(ClusterSpecError):
        load_cluster_spec(_write(tmp_path, "module: [os]\nclass: system\n"))


def test_connect_rejects_two_targets(tmp_path):
    with pytest.raises(ValueError, match="at most one"):
        with connect(REPO / "cluster" / "local.yaml", scheduler_address="tcp://127.0.0.1:1"):
            pass


# --------------------------------------------------------------------------- bad specs (CLI)


@pytest.fixture
def tiny_libsvm(tmp_path):
    path = tmp_path / "tiny.libsvm"
    path.write_text("+1 1:0.5 2:1\n-1 1:0.1 3:1\n+1 2:0.7\n-1 3:0.2\n")
    return path


def _assert_one_line_error(proc, *needles):
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("dsvm train: error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


CLI_CASES = {
    "outside-allowlist": ("module: subprocess\nclass: Popen\nargs: [[touch, HACKED]]\n", ["not allowed"]),
    "unknown-key": ("module: distributed\nclass: LocalCluster\nworkers: 2\n", ["unknown keys"]),
    "scale-and-adapt": ("module: distributed\nclass: LocalCluster\nscale: 1\nadapt: {maximum: 2}\n", ["either"]),
    "malformed-yaml": ("module: distributed\nclass: [LocalCluster\n", ["not valid YAML"]),
}


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_cli_bad_spec_exits_1_with_one_line(tmp_path, tiny_libsvm, case):
    text, needles = CLI_CASES[case]
    spec = _write(tmp_path, text, "bad.yaml")
    proc = run_dsvm("train", str(tiny_libsvm), "--model", "m.npz", "--cluster", str(spec), cwd=tmp_path)
    _assert_one_line_error(proc, "bad.yaml", *needles)
    assert not (tmp_path / "HACKED").exists() and not (tmp_path / "m.npz").exists()


def test_cli_missing_spec_exits_1_with_one_line(tmp_path, tiny_libsvm):
    proc = run_dsvm("train", str(tiny_libsvm), "--model", "m.npz", "--cluster", "no-such-spec.yaml", cwd=tmp_path)
    _assert_one_line_error(proc, "no-such-spec.yaml", "not found")


def test_cli_missing_scheduler_file_exits_1(tmp_path, tiny_libsvm):
    proc = run_dsvm("train", str(tiny_libsvm), "--model", "m.npz", "--scheduler-file", "nope.json", cwd=tmp_path)
    _assert_one_line_error(proc, "nope.json")


def test_cli_two_targets_exits_1(tmp_path, tiny_libsvm):
    proc = run_dsvm("train", str(tiny_libsvm), "--model", "m.npz", "--cluster", str(REPO / "cluster" / "local.yaml"),
                 "--scheduler-address", "tcp://127.0.0.1:1", cwd=tmp_path)
    _assert_one_line_error(proc, "at most one")


@pytest.mark.parametrize("text", [
    "module: distributed\nclass: LocalCluster\nkwargs: {n_workers: 1, processes: false, n_workerz: 1, "
    "dashboard_address: '127.0.0.1:0'}\n",
    "module: dask_kubernetes\nclass: KubeCluster\n",
    "module: distributed\nclass: LocalCluster\nkwargs: {n_workers: 1, threads_per_worker: 1, host: 127.0.0.1, "
    "dashboard_address: '127.0.0.1:0'}\nwait_for_workers: 2\ntimeout: 2\n",
], ids=["bad-kwarg", "class-missing-from-module", "wait-for-workers-timeout"])
def test_cli_unconstructible_spec_exits_1_with_one_line(tmp_path, tiny_libsvm, text):
    spec = _write(tmp_path, text, "bad.yaml")
    proc = run_dsvm("train", str(tiny_libsvm), "--model", "m.npz", "--cluster", str(spec), cwd=tmp_path)
    _assert_one_line_error(proc)


# --------------------------------------------------------------------------- a spec is data, never code

def _pwned_code(marker: Path) -> str:
    # distributed runs a preload entry that contains a space as Python source
    return f"import os; open({str(marker)!r}, 'w').write(str(os.getpid()))"


def _spec_file(tmp_path: Path, spec: dict) -> Path:
    import yaml

    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_preload_in_local_cluster_scheduler_kwargs_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "PWNED"
    path = _spec_file(tmp_path, {
        "version": 1, "module": "distributed", "class": "LocalCluster",
        "kwargs": {"n_workers": 1, "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0",
                   "scheduler_kwargs": {"preload": [_pwned_code(marker)]}}})
    with pytest.raises(ClusterSpecError, match=r"x\.yaml: kwargs\.scheduler_kwargs\.preload: refused"):
        with connect(path):
            pass
    assert not marker.exists()


def test_preload_directly_under_kwargs_is_refused_and_never_runs_in_a_worker(tmp_path):
    marker = tmp_path / "PWNED"
    path = _spec_file(tmp_path, {
        "module": "distributed", "class": "LocalCluster",
        "kwargs": {"n_workers": 1, "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0",
                   "preload": [_pwned_code(marker)]}})
    with pytest.raises(ClusterSpecError, match=r"kwargs\.preload: refused"):
        with connect(path):
            pass
    assert not marker.exists()


def test_preload_in_slurm_scheduler_options_is_refused_and_never_runs_in_dsvm(tmp_path, monkeypatch):
    pytest.importorskip("dask_jobqueue")
    from dsvm.app.cluster import make_cluster

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    spec = {"module": "dask_jobqueue", "class": "SLURMCluster",
            "kwargs": {"cores": 1, "memory": "1GiB", "scheduler_options": {"preload": [_pwned_code(marker)]}}}
    cluster = None
    try:
        with pytest.raises(ClusterSpecError, match=r"scheduler_options\.preload: refused"):
            cluster = make_cluster(validate_cluster_spec(spec, "x.yaml"), "x.yaml")
    finally:
        if cluster is not None:
            cluster.close()
    assert not marker.exists()


def test_cli_refuses_the_preload_spec_before_any_work(tmp_path, tiny_libsvm):
    """The issue's reproduction: `dsvm train ... --cluster x.yaml` must not run the spec's code."""
    marker = tmp_path / "PWNED"
    spec = _write(tmp_path, """\
        version: 1
        module: distributed
        class: LocalCluster
        kwargs: {n_workers: 1, host: 127.0.0.1, dashboard_address: 127.0.0.1:0,
          scheduler_kwargs: {preload: ["import os; open('PWNED','w').write(str(os.getpid()))"]}}
        """, "x.yaml")
    proc = run_dsvm("train", str(tiny_libsvm), "--model", "m.npz", "--cluster", str(spec), cwd=tmp_path)
    _assert_one_line_error(proc, "x.yaml", "preload", "refused")
    assert not marker.exists() and not (tmp_path / "m.npz").exists()


LOCAL = {"module": "distributed", "class": "LocalCluster"}
SLURM = {"module": "dask_jobqueue", "class": "SLURMCluster"}
CODE_IN_SPEC = {
    "worker-preload-nanny": (LOCAL, {"preload_nanny": ["x"]}, "preload_nanny: refused"),
    "preload-argv": (LOCAL, {"scheduler_kwargs": {"preload_argv": ["--x"]}}, "preload_argv: refused"),
    "worker-class": (LOCAL, {"worker_class": "distributed.Worker"}, "worker_class: refused"),
    "plugins": (LOCAL, {"plugins": ["x"]}, "plugins: refused"),
    "services": (LOCAL, {"services": {"x": "os.system"}}, "services: refused"),
    "worker-args-preload": (SLURM, {"cores": 1, "memory": "1GiB", "worker_extra_args": ["--preload", "x.py"]},
                            "'--preload' is not accepted"),
    "worker-args-preload-eq": (SLURM, {"cores": 1, "memory": "1GiB", "worker_extra_args": ["--preload-nanny=x"]},
                               "is not accepted"),
    "worker-command": (SLURM, {"cores": 1, "memory": "1GiB", "worker_command": "http.server"},
                       "'worker_command' is not accepted"),
    "scheduler-cls": (SLURM, {"cores": 1, "memory": "1GiB", "scheduler_cls": "os.system"}, "scheduler_cls: refused"),
    "shell-in-a-data-string": (SLURM, {"cores": 1, "memory": "1GiB", "local_directory": "/tmp; touch HACKED"},
                               "local_directory: '/tmp; touch HACKED' is not a plain value"),
    "command-substitution": (LOCAL, {"local_directory": "$(touch HACKED)"}, "is not a plain value"),
    "python-with-arguments": (SLURM, {"cores": 1, "memory": "1GiB", "python": "python -c 'import os'"},
                              "python: "),
    "nested-unknown": (LOCAL, {"scheduler_kwargs": {"validate": True}}, "'validate' is not accepted here"),
    "callable-type": (LOCAL, {"n_workers": "1"}, "n_workers: expected an integer"),
    "kube-env-ld-preload": ({"module": "dask_kubernetes.operator", "class": "KubeCluster"},
                            {"env": {"LD_PRELOAD": "/tmp/x.so"}}, "LD_PRELOAD: refused"),
    "kube-custom-spec": ({"module": "dask_kubernetes.operator", "class": "KubeCluster"},
                         {"custom_cluster_spec": "x.yaml"}, "custom_cluster_spec: refused"),
}


@pytest.mark.parametrize("case", list(CODE_IN_SPEC))
def test_arguments_that_name_code_are_refused_anywhere_in_the_tree(case):
    head, kwargs, match = CODE_IN_SPEC[case]
    with pytest.raises(ClusterSpecError, match=re.escape(match)):
        validate_cluster_spec({**head, "kwargs": kwargs}, "x.yaml")


def test_positional_args_and_adapt_callables_are_refused():
    with pytest.raises(ClusterSpecError, match="positional 'args' are not accepted"):
        validate_cluster_spec({**LOCAL, "args": ["name", 1]}, "x.yaml")
    with pytest.raises(ClusterSpecError, match="'worker_key' is not accepted"):
        validate_cluster_spec({**LOCAL, "adapt": {"minimum": 1, "worker_key": "os.getpid"}}, "x.yaml")


def _listening(proc) -> set[str]:
    return {c.laddr.ip for c in proc.net_connections(kind="inet") if c.status == "LISTEN"}


def test_minimal_spec_listens_on_localhost_only_dashboard_included(tmp_path):
    """`kwargs: {n_workers: 1}` names no host: nothing it starts may listen on 0.0.0.0."""
    psutil = pytest.importorskip("psutil")
    path = _write(tmp_path, "module: distributed\nclass: LocalCluster\nkwargs: {n_workers: 1}\n")
    with connect(path) as client:
        info = client.scheduler_info()
        assert _host(info["address"]) == "127.0.0.1"
        assert [_host(w) for w in scheduler_workers(client)] == ["127.0.0.1"]
        assert client.dashboard_link.startswith("http://127.0.0.1:")
        me = psutil.Process()
        addresses = _listening(me).union(*(_listening(p) for p in me.children(recursive=True)))
        assert addresses == {"127.0.0.1"}, addresses


def test_minimal_jobqueue_spec_binds_scheduler_dashboard_and_workers_to_localhost(tmp_path, monkeypatch):
    pytest.importorskip("dask_jobqueue")
    from dsvm.app.cluster import make_cluster

    monkeypatch.chdir(tmp_path)
    spec = validate_cluster_spec({**SLURM, "kwargs": {"cores": 1, "memory": "1GiB"}}, "x.yaml")
    cluster = make_cluster(spec, "x.yaml")
    try:
        assert _host(cluster.scheduler_address) == "127.0.0.1"
        assert cluster.dashboard_link.startswith("http://127.0.0.1:")
        script = cluster.job_script()
        assert "--dashboard-address 127.0.0.1:0" in script and "--host 127.0.0.1" in script
    finally:
        cluster.close()


def test_a_host_named_in_the_spec_is_kept():
    from dsvm.app.cluster import local_listeners

    kw = local_listeners("LocalCluster", {"host": "0.0.0.0", "dashboard_address": "0.0.0.0:8787"})
    assert kw["host"] == "0.0.0.0" and kw["dashboard_address"] == "0.0.0.0:8787"
    assert local_listeners("LocalCluster", {"dashboard_address": ":8787"})["dashboard_address"] == "127.0.0.1:8787"
    kw = local_listeners("SLURMCluster", {"interface": "ib0", "worker_extra_args": ["--dashboard-address", ":0"]})
    assert "host" not in kw["scheduler_options"] and "--host" not in kw["worker_extra_args"]
    assert kw["worker_extra_args"] == ["--dashboard-address", "127.0.0.1:0"]


# --------------------------------------------------------------------------- a scheduler that does not answer

@pytest.fixture
def closed_port():
    """A local TCP port nothing listens on (connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_server():
    """A TCP server that accepts connections and never answers (no distributed handshake)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []
    stop = threading.Event()

    def serve():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    server.close()


def _train_error(tmp_path, tiny_libsvm, capsys, *where) -> str:
    from dsvm.app.cli import main

    capsys.readouterr()
    assert main(["-q", "train", str(tiny_libsvm), "--model", str(tmp_path / "m.npz"), *where]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("dsvm train: error: "), err
    assert not (tmp_path / "m.npz").exists()
    return err[0]


def test_a_refused_scheduler_address_is_one_line_without_the_connect_timeout(tmp_path, tiny_libsvm, capsys,
                                                                            closed_port):
    """It was a 40-line traceback after the 30 s connect timeout."""
    import dask

    address = f"tcp://127.0.0.1:{closed_port}"
    with dask.config.set({"dsvm.connect-timeout": 300}):  # a refused port must not wait for it
        line = _train_error(tmp_path, tiny_libsvm, capsys, "--scheduler-address", address)
    assert line.startswith(f"dsvm train: error: cannot reach the Dask scheduler at {address}: connection refused")
    assert "waited 300 s" not in line


def test_a_scheduler_file_of_a_dead_scheduler_is_one_line(tmp_path, tiny_libsvm, capsys, closed_port):
    address = f"tcp://127.0.0.1:{closed_port}"
    (tmp_path / "sched.json").write_text(json.dumps({"type": "Scheduler", "address": address}))
    line = _train_error(tmp_path, tiny_libsvm, capsys, "--scheduler-file", str(tmp_path / "sched.json"))
    assert f"cannot reach the Dask scheduler at {address} (from scheduler file {tmp_path / 'sched.json'}): " \
           "connection refused" in line
    (tmp_path / "sched.json").write_text("{not json")
    assert "is not a JSON scheduler file" in _train_error(tmp_path, tiny_libsvm, capsys, "--scheduler-file",
                                                          str(tmp_path / "sched.json"))


def test_a_fifo_scheduler_file_or_spec_is_one_line_at_once(tmp_path, tiny_libsvm, capsys):
    """Opening a FIFO waits for a writer: --scheduler-file and --cluster blocked for ever."""
    import os

    from helpers import call_near_fifos

    fifo = tmp_path / "sched.json"
    os.mkfifo(fifo)
    lines = []
    for option in ("--scheduler-file", "--cluster"):
        assert call_near_fifos(lambda: lines.append(_train_error(tmp_path, tiny_libsvm, capsys, option, str(fifo))),  # noqa: B023
                               fifo) is None
    kind = "it is a FIFO (named pipe), not a regular file"
    assert lines == [f"dsvm train: error: {fifo}: {kind}; a scheduler file must be a regular file",
                     f"dsvm train: error: {fifo}: {kind}; a cluster spec file must be a regular file"]


def test_a_server_that_never_answers_fails_after_the_connect_timeout(tmp_path, tiny_libsvm, capsys, silent_server):
    """distributed's handshake has no timeout of its own: this waited forever."""
    import dask

    with dask.config.set({"dsvm.connect-timeout": 2}):
        line = _train_error(tmp_path, tiny_libsvm, capsys, "--scheduler-address", silent_server)
    assert re.search(f"cannot reach the Dask scheduler at {silent_server}: no answer \\(waited \\d+ s\\)$", line), line


def test_a_running_scheduler_is_attached_to(tmp_path, tiny_libsvm, scheduler_address):
    from dsvm.app.cli import main

    assert main(["-q", "train", str(tiny_libsvm), "--model", str(tmp_path / "m.npz"), "-k", "2",
                 "--scheduler-address", scheduler_address]) == 0
    assert (tmp_path / "m.npz").exists()


# --------------------------------------------------------------------------- sizes of the default local cluster

@pytest.mark.parametrize("option, value", [
    ("--threads-per-worker", "-1"),  # was distributed's "Nanny failed to start" traceback
    ("--workers", "-1"),             # waited 60 s, then a traceback
    ("--workers", "0"),              # was ignored: the default number of workers started
    ("--memory-limit", "0"),         # was ignored: distributed takes 0 as no limit
    ("--memory-limit", "0MiB"),
    ("--memory-limit", "lots"),
])
def test_a_local_cluster_size_that_is_not_one_is_one_line_before_any_work(tmp_path, tiny_libsvm, capsys, option,
                                                                          value):
    line = _train_error(tmp_path, tiny_libsvm, capsys, option, value)
    assert line.startswith(f"dsvm train: error: {option} {value}: give a "), line


def test_local_cluster_sizes_given_with_another_cluster_are_refused(tmp_path, tiny_libsvm, capsys, closed_port):
    """--workers and friends size the default local cluster only; with another cluster they were ignored."""
    line = _train_error(tmp_path, tiny_libsvm, capsys, "--workers", "2", "--scheduler-address",
                        f"tcp://127.0.0.1:{closed_port}")
    assert "--workers sizes the default local cluster; --scheduler-address names a cluster" in line


@pytest.mark.parametrize("local, match", [({"n_workers": 0}, "n_workers 0: give a whole number"),
                                          ({"threads_per_worker": 1.5}, "threads_per_worker 1.5: give a whole"),
                                          ({"memory_limit": 0}, "memory_limit 0: give a memory size")])
def test_connect_checks_the_local_cluster_sizes(local, match):
    with pytest.raises(ClusterSpecError, match=match):
        with connect(local=local):
            pass


def test_good_local_cluster_sizes_are_used(tmp_path):
    from dsvm.app.cluster import check_local_sizes

    kwargs = {"n_workers": 1, "threads_per_worker": 2, "memory_limit": "1GiB"}
    assert check_local_sizes(kwargs) == kwargs and check_local_sizes({"memory_limit": "auto"})
    with connect(local=kwargs) as client:
        (worker,) = scheduler_workers(client).values()
    assert worker["nthreads"] == 2 and worker["memory_limit"] == 2**30


# --------------------------------------------------------------------------- a quiet shutdown

SHUTDOWN_SCRIPT = """
import time
from dsvm.app.cluster import connect

def fast_heartbeats(dask_worker):
    # a heartbeat every millisecond: one is on its way to the scheduler whenever it closes
    callback = dask_worker.periodic_callbacks["heartbeat"]
    beat = dask_worker.heartbeat

    async def heartbeat():
        await beat()
        callback.callback_time = 1

    callback.stop()
    callback.callback = heartbeat
    callback.callback_time = 1
    callback.start()

def busy(seconds):
    end = time.time() + seconds
    while time.time() < end:
        pass

if __name__ == "__main__":
    for _ in range(2):
        with connect(local={"n_workers": 2, "threads_per_worker": 1}) as client:
            client.run(fast_heartbeats)
            futures = [client.submit(busy, 3, pure=False) for _ in range(4)]  # still running at the close
            time.sleep(0.5)
    print("done")
"""


def test_closing_a_started_cluster_prints_no_traceback(tmp_path):
    """After a successful bench_scale run, a worker's heartbeat printed a CommClosedError traceback."""
    script = tmp_path / "shutdown.py"
    script.write_text(SHUTDOWN_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr
    # nothing of the close: no traceback, no comm error (a loaded machine may still log that the event loop
    # was slow, which says nothing about the close)
    assert not [line for line in proc.stderr.splitlines() if line.strip() and "unresponsive" not in line], \
        proc.stderr[-3000:]


def test_closing_a_cluster_of_in_process_workers_leaves_this_process_logging():
    """The workers are told to stop logging at the close: not when they run inside this process."""
    with connect(local={"n_workers": 1, "threads_per_worker": 1, "processes": False, "protocol": "tcp"}):
        pass
    assert logging.getLogger("dsvm.test").isEnabledFor(logging.WARNING)
    assert logging.getLogger("distributed").level != logging.CRITICAL + 1


# --------------------------------------------------------------------------- how many workers a spec or option asks for

def _most_local_workers() -> int:
    import os

    from dsvm.app._cluster_lifecycle import MAX_WORKERS_PER_CORE

    return MAX_WORKERS_PER_CORE * (os.cpu_count() or 1)


LOCAL_SPEC = {"module": "distributed", "class": "LocalCluster"}


@pytest.mark.parametrize("spec, where", [
    ({**LOCAL_SPEC, "kwargs": {"n_workers": 10**6}}, "kwargs.n_workers 1000000"),
    ({**LOCAL_SPEC, "scale": 10**6}, "scale 1000000"),
    ({**LOCAL_SPEC, "adapt": {"minimum": 1, "maximum": 10**6}}, "adapt.maximum 1000000"),
])
def test_more_local_workers_than_this_machine_can_run_are_refused(spec, where):
    """`--workers 1000000` or a spec's `n_workers: 1000000` grew memory by 20 MB/s and never failed."""
    from dsvm.app.cluster import check_local_sizes

    most = _most_local_workers()
    with pytest.raises(ClusterSpecError, match=f"^--workers 1000000: give at most {most} \\(4 worker processes per "
                                               "CPU core; this machine has \\d+\\)$"):
        check_local_sizes({"n_workers": 10**6}, {"n_workers": "--workers"})
    with pytest.raises(ClusterSpecError, match=f"^s.yaml: {re.escape(where)}: give at most {most} "):
        validate_cluster_spec(spec, "s.yaml")
    assert check_local_sizes({"n_workers": most}) == {"n_workers": most}
    validate_cluster_spec({**LOCAL_SPEC, "kwargs": {"n_workers": most}})


def test_the_command_refuses_a_million_workers_before_any_work(tmp_path, tiny_libsvm, capsys):
    line = _train_error(tmp_path, tiny_libsvm, capsys, "--workers", "1000000")
    assert line.startswith(f"dsvm train: error: --workers 1000000: give at most {_most_local_workers()} "), line


@pytest.mark.parametrize("spec, bound", [
    ({**LOCAL_SPEC, "kwargs": {"n_workers": 0}, "wait_for_workers": 1}, "0 worker(s) (kwargs.n_workers 0)"),
    ({**LOCAL_SPEC, "kwargs": {"n_workers": 2}, "scale": 1, "wait_for_workers": 2}, "1 worker(s) (scale 1)"),
    ({**LOCAL_SPEC, "adapt": {"maximum": 2}, "wait_for_workers": 3}, "2 worker(s) (adapt.maximum)"),
    ({"module": "dask_jobqueue", "class": "SLURMCluster", "kwargs": {"cores": 1}, "wait_for_workers": 1},
     "0 worker(s) (no scale, adapt or n_workers)"),
    ({"module": "dask_jobqueue", "class": "SLURMCluster", "kwargs": {"processes": 2}, "scale": 3,
      "wait_for_workers": 5}, "4 worker(s) (scale 3 in jobs of 2)"),
    ({"module": "dask_gateway", "class": "GatewayCluster", "wait_for_workers": 1},
     "0 worker(s) (no scale, adapt or n_workers)"),
])
def test_a_spec_that_waits_for_more_workers_than_it_starts_is_refused_at_once(spec, bound):
    """`n_workers: 0` with `wait_for_workers: 1` waited the whole timeout, then "only 0 of 1 workers joined"."""
    with pytest.raises(ClusterSpecError, match=f"^s.yaml: wait_for_workers is {spec['wait_for_workers']} but the "
                                               f"spec starts at most {re.escape(bound)}; lower wait_for_workers"):
        validate_cluster_spec(spec, "s.yaml")


@pytest.mark.parametrize("spec", [
    {**LOCAL_SPEC, "wait_for_workers": 1},  # LocalCluster's own number of workers: at least one
    {**LOCAL_SPEC, "adapt": {"minimum": 1}, "wait_for_workers": 4},
    {"module": "dask_jobqueue", "class": "SLURMCluster", "scale": 1, "wait_for_workers": 2},  # jobs of ? workers
    {"module": "dask_jobqueue", "class": "SLURMCluster", "kwargs": {"processes": 2}, "scale": 3, "wait_for_workers": 4},
    {"module": "dask_kubernetes.operator", "class": "KubeCluster", "wait_for_workers": 1},
])
def test_a_spec_whose_workers_are_not_known_from_it_is_waited_for(spec):
    validate_cluster_spec(spec, "s.yaml")


def test_a_spec_with_no_workers_and_a_wait_fails_before_any_cluster_starts(tmp_path, tiny_libsvm, capsys):
    spec = _write(tmp_path, "module: distributed\nclass: LocalCluster\nkwargs: {n_workers: 0}\nwait_for_workers: 1\n")
    line = _train_error(tmp_path, tiny_libsvm, capsys, "--cluster", str(spec))
    assert line == (f"dsvm train: error: {spec}: wait_for_workers is 1 but the spec starts at most 0 worker(s) "
                    "(kwargs.n_workers 0); lower wait_for_workers or start more workers")


# --------------------------------------------------------------------------- a peer that is not a Dask scheduler

@pytest.fixture
def stranger():
    """``serve(payload)``: the address of a TCP server that sends ``payload`` to each connection and keeps it
    open (a service on the port that is not a Dask scheduler)."""
    servers, accepted, stop = [], [], threading.Event()

    def serve(payload: bytes) -> str:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(0.1)
        servers.append(server)

        def loop():
            while not stop.is_set():
                try:
                    conn = server.accept()[0]
                except OSError:
                    continue
                accepted.append(conn)
                conn.sendall(payload)

        threading.Thread(target=loop, daemon=True).start()
        return f"tcp://127.0.0.1:{server.getsockname()[1]}"

    yield serve
    stop.set()
    for s in accepted + servers:
        s.close()


@pytest.mark.parametrize("payload", [
    b"\xff" * 64,                                        # was "Maximum allowed dimension exceeded"
    b"\0" * 6 + b"11",                                   # was "Unable to allocate 3.07 EiB ..."
    (43).to_bytes(8, "little") + b"\xff" * 43,           # a plausible size, then no Dask message
], ids=["ff", "exabytes", "garbage-frames"])
def test_a_server_that_is_not_a_dask_scheduler_is_one_line_naming_it(tmp_path, tiny_libsvm, capsys, stranger,
                                                                     monkeypatch, payload):
    import distributed.comm.tcp

    address = stranger(payload)
    sizes, host_array = [], distributed.comm.tcp.host_array
    monkeypatch.setattr(distributed.comm.tcp, "host_array", lambda n: sizes.append(n) or host_array(n))
    line = _train_error(tmp_path, tiny_libsvm, capsys, "--scheduler-address", address)
    assert line == (f"dsvm train: error: the server at {address} does not speak Dask's protocol: it is not a Dask "
                    "scheduler (check the host and the port)")
    assert all(n <= 2**20 for n in sizes), sizes  # nothing allocated on a stranger's word


@pytest.mark.parametrize("address", ["ucx://127.0.0.1:1", "inproc://127.0.0.1/1/1"])
def test_an_address_of_a_scheme_dsvm_does_not_attach_over_is_one_line(tmp_path, tiny_libsvm, capsys, address):
    """`ucx://` was a traceback: "TypeError: Can't instantiate abstract class UCXConnector"."""
    scheme = address.split("://")[0]
    line = _train_error(tmp_path, tiny_libsvm, capsys, "--scheduler-address", address)
    assert line == (f"dsvm train: error: {address}: dsvm attaches to a Dask scheduler over tcp:// or tls://, "
                    f"not {scheme}://")
    (tmp_path / "sched.json").write_text(json.dumps({"address": address}))
    line = _train_error(tmp_path, tiny_libsvm, capsys, "--scheduler-file", str(tmp_path / "sched.json"))
    assert line.startswith(f"dsvm train: error: {address} (from scheduler file {tmp_path / 'sched.json'}): dsvm "
                           "attaches to a Dask scheduler over tcp:// or tls://")
