"""The a9a pipeline on a real SLURM: dask workers submitted as batch jobs by dask-jobqueue.

Needs a working SLURM with an idle node (CI starts a single-node one on localhost with
``.ci/slurm-setup.sh``); skipped otherwise.  Runs, from the repository root::

    dsvm run pipelines/a9a.yaml --cluster cluster/slurm.yaml --set output=<tmp>

and checks the test accuracy in report.json and that the worker jobs really ran under
SLURM (seen RUNNING in ``squeue`` during the run; afterwards in ``sacct`` when accounting
is enabled, else in the job-completion log or ``scontrol show job``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import data_file

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "cluster" / "slurm.yaml"
PIPELINE = REPO / "pipelines" / "a9a.yaml"

pytestmark = [pytest.mark.slow, pytest.mark.data]


def _run(cmd: list[str], timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def slurm():
    """Skip unless SLURM answers and has an idle node; returns `scontrol show config` as a dict."""
    for tool in ("sinfo", "squeue", "sbatch", "scancel", "scontrol"):
        if shutil.which(tool) is None:
            pytest.skip(f"SLURM is not available ({tool} not found; CI starts one with .ci/slurm-setup.sh)")
    deadline = time.monotonic() + 10  # a node that was just started or resumed answers within seconds
    while True:
        try:
            proc = _run(["sinfo", "-h", "-N", "-o", "%N %T"])
        except subprocess.TimeoutExpired:
            pytest.skip("SLURM is not available (sinfo timed out: is slurmctld running?)")
        if proc.returncode != 0:
            pytest.skip(f"SLURM is not available (sinfo: {proc.stderr.strip() or proc.returncode})")
        # "idle*" = idle but not responding; "~#$@+" are power/reservation flags
        states = [line.split()[1].rstrip("~#$@+") for line in proc.stdout.splitlines() if len(line.split()) == 2]
        if any(s in ("idle", "mixed") for s in states):
            break
        if time.monotonic() > deadline:
            pytest.skip(f"SLURM has no idle node (sinfo: {' '.join(proc.stdout.split()) or 'no nodes'})")
        time.sleep(0.5)
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed (pip install 'dsvm[slurm]')")
    config = {}
    for line in _run(["scontrol", "show", "config"]).stdout.splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            config[key.strip()] = value.strip()
    return config


def _job_ids_and_names(text: str) -> dict[str, str]:
    """JobId -> JobName from squeue/sacct-style "ID NAME" lines."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and re.fullmatch(r"\d+(_\d+)?", parts[0]):
            out[parts[0]] = parts[1]
    return out


def _jobcomp(config: dict) -> dict[str, str]:
    """JobId -> 'name state' from a jobcomp/filetxt log, if SLURM writes one."""
    if config.get("JobCompType") != "jobcomp/filetxt":
        return {}
    path = Path(config.get("JobCompLoc", ""))
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        m = re.search(r"JobId=(\d+) .*?Name=(\S+) JobState=(\S+)", line)
        if m:
            out[m.group(1)] = f"{m.group(2)} {m.group(3)}"
    return out


def _sacct(since: str) -> dict[str, str] | None:
    """JobId -> JobName from sacct, or None when accounting storage is not enabled."""
    try:
        proc = _run(["sacct", "-n", "-X", "-P", "-S", since, "-o", "JobID,JobName,State"])
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0 or "disabled" in proc.stderr:
        return None
    return {p[0]: f"{p[1]} {p[2]}" for p in (line.split("|") for line in proc.stdout.splitlines()) if len(p) >= 3}


def test_a9a_pipeline_on_slurm(slurm, tmp_path):  # noqa: C901
    from dsvm.app.cluster import load_cluster_spec

    data_dir = data_file("a9a.train").parent
    data_file("a9a.test")
    spec = load_cluster_spec(SPEC)
    job_name = spec["kwargs"]["job_name"]
    log_dir = REPO / spec["kwargs"]["log_directory"]
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 5))
    known = set(_job_ids_and_names(_run(["squeue", "-h", "-o", "%i %j"]).stdout)) | set(_jobcomp(slurm))

    seen: dict[str, set[str]] = {}  # job id -> states seen in squeue while the pipeline ran
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            try:
                lines = _run(["squeue", "-h", "-o", "%i %j %T"], timeout=10).stdout
            except subprocess.TimeoutExpired:
                continue
            for line in lines.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] == job_name and parts[0] not in known:
                    seen.setdefault(parts[0], set()).add(parts[2])
            stop.wait(0.3)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out = tmp_path / "a9a"
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "dsvm", "-q", "run", str(PIPELINE.relative_to(REPO)),
             "--cluster", str(SPEC.relative_to(REPO)), "--set", f"output={out}", "--set", f"data_dir={data_dir}"],
            cwd=REPO, capture_output=True, text=True, timeout=900,
        )
    finally:
        stop.set()
        watcher.join(timeout=15)
    seconds = time.monotonic() - t0
    assert proc.returncode == 0, f"dsvm run failed ({proc.returncode}) after {seconds:.0f}s:\n{proc.stderr[-4000:]}"

    report = json.loads((out / "report.json").read_text())
    assert report["model"]["params"] == {"C": 10, "gamma": 0.05, "n_components": 500, "random_state": 0}
    assert report["evaluation"]["n_test"] == 16281
    assert report["evaluation"]["accuracy"] >= 0.845, report["evaluation"]["accuracy"]
    assert [r["n_components"] for r in report["accuracy_vs_k"]] == [100, 200, 500, 1000]
    assert (out / "model.npz").exists() and (out / "report.md").exists()

    # the worker jobs: RUNNING in squeue during the run, gone (cancelled by dsvm) afterwards
    assert seen, f"no {job_name!r} job appeared in squeue during the run"
    running = [j for j, states in seen.items() if "RUNNING" in states]
    assert running, f"the {job_name!r} jobs never ran: {seen}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        still = set(_job_ids_and_names(_run(["squeue", "-h", "-o", "%i %j"]).stdout)) & set(seen)
        if not still:
            break
        time.sleep(0.5)
    assert not still, f"dsvm left worker jobs in the queue: {sorted(still)}"

    # ... and SLURM's own records of them
    records = _sacct(since)
    if records is None:
        records = _jobcomp(slurm)
    if not records:  # no accounting and no jobcomp log: ask the controller (MinJobAge)
        records = {}
        for job in running:
            show = _run(["scontrol", "show", "job", job]).stdout
            m = re.search(r"JobName=(\S+).*?JobState=(\S+)", show, re.S)
            if m:
                records[job] = f"{m.group(1)} {m.group(2)}"
    for job in running:
        assert job in records, f"job {job} is not in SLURM's records ({sorted(records)[-5:]})"
        assert records[job].startswith(job_name), records[job]

    # the worker really joined this scheduler: its log, written by SLURM, says so
    logs = [log_dir / f"{job_name}-{job}.err" for job in running]
    assert any(p.exists() and "Registered to:" in p.read_text(errors="replace") for p in logs), logs


def test_batch_script_with_slurm_runner(slurm, tmp_path):
    """cluster/slurm-batch.sh: scheduler, dsvm and a worker as tasks of one job (SLURMRunner)."""
    data_dir = data_file("a9a.train").parent
    data_file("a9a.test")
    out = tmp_path / "a9a-batch"
    log = tmp_path / "job.out"
    # 3 tasks (scheduler, client, one worker) overcommitted onto the available cores
    cmd = ["sbatch", "--parsable", "--wait", "--ntasks=3", "--cpus-per-task=1", "--overcommit",
           "--mem-per-cpu=2G", "--time=00:15:00", f"--output={log}", "cluster/slurm-batch.sh",
           "run", "pipelines/a9a.yaml", "--set", f"output={out}", "--set", f"data_dir={data_dir}"]
    env = {**os.environ, "DSVM_DASK_INTERFACE": "lo", "DSVM_DASHBOARD": "127.0.0.1:0",
           "DSVM_SCHEDULER_FILE": str(tmp_path / "scheduler-{job_id}.json")}
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    text = log.read_text(errors="replace") if log.exists() else ""
    assert proc.returncode == 0, f"batch job failed ({proc.returncode}): {proc.stderr}\n{text[-4000:]}"
    job = proc.stdout.strip().split(";")[0]
    assert f"dsvm job {job}: 3 tasks" in text
    assert f"dsvm job {job}: security: TLS with temporary certificates made for this job" in text
    assert re.search(r"attached to scheduler tls://\S+ from \S+scheduler-\d+\.json", text), text[-2000:]
    assert re.search(r"dashboard bound to http://127\.0\.0\.1:\d+/status", text), text[-2000:]
    assert "Traceback" not in text and "CommClosedError" not in text, text[-4000:]
    assert not list(REPO.glob(f".dsvm-tls-{job}")), "the job's certificates outlived it"
    report = json.loads((out / "report.json").read_text())
    assert report["evaluation"]["accuracy"] >= 0.845
    assert not list(tmp_path.glob("scheduler-*.json")), "the scheduler file was not removed"


def test_batch_script_says_at_once_when_slurm_cannot_run_the_job(slurm, tmp_path):
    """`sbatch cluster/slurm-batch.sh` asking for more than a node has pended for ever without a hint."""
    before = set(_job_ids_and_names(_run(["squeue", "-h", "-o", "%i %j"]).stdout))
    proc = subprocess.run(["bash", "cluster/slurm-batch.sh", "--cpus-per-task=100000", f"--output={tmp_path}/x.out",
                           "run", "pipelines/a9a.yaml"], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("SLURM_")})
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("slurm-batch.sh: error: SLURM cannot run this job as asked: "), line
    assert set(_job_ids_and_names(_run(["squeue", "-h", "-o", "%i %j"]).stdout)) <= before


def test_a_spec_asking_for_a_partition_that_does_not_exist_fails_at_once(slurm, tmp_path):
    """`queue: gpu` on a SLURM without it: sbatch refused the job at once, dsvm printed two tornado tracebacks
    and waited the whole timeout."""
    import yaml

    spec = yaml.safe_load(SPEC.read_text())
    spec["kwargs"]["queue"] = "no-such-partition"
    spec["kwargs"]["log_directory"] = str(tmp_path / "logs")
    spec["timeout"] = 600
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "t.svm").write_text("+1 1:0.5 2:1\n-1 1:0.1 3:1\n+1 2:0.7\n-1 3:0.2\n")
    proc = subprocess.run([sys.executable, "-m", "dsvm", "-q", "train", "t.svm", "--model", "m.npz", "--cluster",
                           "spec.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("dsvm train: error: spec.yaml: sbatch refused the worker job: sbatch: error: "), line
    assert "no-such-partition" in line or "partition" in line.lower(), line
