"""cluster/slurm-batch.sh and cluster/slurm_runner.py without a SLURM: the job's scheduler speaks TLS with
certificates only the job's owner can read, or plain TCP only on an interface named explicitly, and says
which; the script run outside a job submits itself and stops at once, in SLURM's words, when SLURM cannot
run it.  ``sbatch``, ``squeue``, ``scancel`` and ``srun`` are stand-ins first on PATH (tests/integration/test_slurm.py
runs the script on a real SLURM)."""

from __future__ import annotations

import importlib.util
import os
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "cluster" / "slurm-batch.sh"

FAKE_SRUN = """#!/bin/sh
# what the job's tasks would get: their environment, and the certificate folder's modes
env > "$FAKE_OUT/srun.env"
if [ -n "$DASK_DISTRIBUTED__COMM__TLS__CA_FILE" ]; then
  d=$(dirname "$DASK_DISTRIBUTED__COMM__TLS__CA_FILE")
  stat -c '%a %n' "$d" "$d"/* > "$FAKE_OUT/srun.modes"
fi
echo "$*" > "$FAKE_OUT/srun.args"
"""
FAKE_SBATCH = """#!/bin/sh
echo "sbatch $*" >> "$FAKE_OUT/calls"
case " $* " in
  *" --test-only "*)
    if [ -n "$FAKE_TEST_ONLY_FAILS" ]; then
      echo "allocation failure: Requested node configuration is not available" >&2; exit 1
    fi
    echo "sbatch: Job 4242 to start at 2026-01-01T00:00:00 using 16 processors on nodes n1 in partition debug" >&2 ;;
  *) echo 4242 ;;
esac
"""
FAKE_SQUEUE = """#!/bin/sh
echo "squeue $*" >> "$FAKE_OUT/calls"
echo "$FAKE_SQUEUE"
"""
FAKE_SCANCEL = """#!/bin/sh
echo "scancel $*" >> "$FAKE_OUT/calls"
"""


@pytest.fixture
def site(tmp_path):
    """A submission directory like the repository root (cluster/ and .venv linked) and stand-ins for SLURM's
    commands; returns (folder, environment)."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "cluster").symlink_to(REPO / "cluster")
    if (REPO / ".venv").exists():
        (root / ".venv").symlink_to(REPO / ".venv")
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("sbatch", FAKE_SBATCH), ("squeue", FAKE_SQUEUE),
                       ("scancel", FAKE_SCANCEL)):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "DSVM_", "DASK_DISTRIBUTED__COMM", "FAKE_"))}
    env.update(PATH=f"{fake}{os.pathsep}{env['PATH']}", FAKE_OUT=str(out), DSVM_SUBMIT_WATCH="5")
    return root, env


def _in_job(env: dict, root: Path, **more: str) -> dict:
    return {**env, "SLURM_JOB_ID": "777", "SLURM_SUBMIT_DIR": str(root), "SLURM_NTASKS": "3",
            "SLURM_JOB_NODELIST": "n1", **more}


def _bash(args: list[str], root: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "cluster/slurm-batch.sh", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)


def _env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_the_jobs_scheduler_speaks_tls_with_certificates_only_the_owner_reads(site):
    """With DSVM_DASK_INTERFACE unset (the default) the scheduler listened on every interface without TLS:
    anyone on the network could submit code to it."""
    root, env = site
    proc = _bash(["train", "data.zarr", "--model", "m.npz"], root, _in_job(env, root))
    assert proc.returncode == 0, proc.stderr
    out = Path(env["FAKE_OUT"])
    task_env = _env_file(out / "srun.env")
    folder = root / ".dsvm-tls-777"
    assert task_env["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] == "True"
    assert task_env["DASK_DISTRIBUTED__COMM__TLS__CA_FILE"] == str(folder / "cert.pem")
    for role in ("SCHEDULER", "WORKER", "CLIENT"):
        assert task_env[f"DASK_DISTRIBUTED__COMM__TLS__{role}__CERT"] == str(folder / "cert.pem")
        assert task_env[f"DASK_DISTRIBUTED__COMM__TLS__{role}__KEY"] == str(folder / "key.pem")
    modes = sorted(line.split() for line in (out / "srun.modes").read_text().splitlines())
    assert modes == sorted([["700", str(folder)], ["600", str(folder / "cert.pem")], ["600", str(folder / "key.pem")]])
    assert not folder.exists(), "the job's certificates outlived it"
    assert "dsvm job 777: security: TLS with temporary certificates made for this job" in proc.stdout
    assert "the scheduler (all interfaces) accepts only this job's processes" in proc.stdout
    assert (out / "srun.args").read_text().split() == ["--kill-on-bad-exit=1", "python", "cluster/slurm_runner.py",
                                                       "train", "data.zarr", "--model", "m.npz"]


def test_no_tls_needs_an_interface_named_and_says_so(site):
    root, env = site
    proc = _bash(["train", "d.zarr"], root, _in_job(env, root, DSVM_DASK_SECURITY="none"))
    assert proc.returncode == 1 and not (Path(env["FAKE_OUT"]) / "srun.env").exists()
    assert proc.stderr.strip().splitlines() == [
        "dsvm job 777: error: DSVM_DASK_SECURITY=none needs DSVM_DASK_INTERFACE (e.g. lo): without TLS the "
        "scheduler would accept code from anyone on any network"]
    proc = _bash(["train", "d.zarr"], root, _in_job(env, root, DSVM_DASK_SECURITY="none", DSVM_DASK_INTERFACE="lo"))
    assert proc.returncode == 0, proc.stderr
    assert "security: NONE (DSVM_DASK_SECURITY=none): anyone who reaches interface lo" in proc.stdout
    assert "DASK_DISTRIBUTED__COMM__TLS__CA_FILE" not in _env_file(Path(env["FAKE_OUT"]) / "srun.env")


def test_a_certificate_folder_that_exists_is_never_used(site):
    root, env = site
    (root / ".dsvm-tls-777").mkdir()
    (root / ".dsvm-tls-777" / "key.pem").write_text("someone else's")
    proc = _bash(["train", "d.zarr"], root, _in_job(env, root))
    assert proc.returncode == 1 and not (Path(env["FAKE_OUT"]) / "srun.env").exists()
    assert "File exists" in proc.stderr
    assert (root / ".dsvm-tls-777" / "key.pem").read_text() == "someone else's"


def test_outside_a_job_a_request_slurm_cannot_run_fails_at_once_in_its_words(site):
    """`sbatch cluster/slurm-batch.sh` on nodes smaller than its 4 tasks x 4 CPUs pended for ever without a hint."""
    root, env = site
    proc = _bash(["--partition=debug", "train", "d.zarr"], root, {**env, "FAKE_TEST_ONLY_FAILS": "1"})
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "slurm-batch.sh: error: SLURM cannot run this job as asked: allocation failure: Requested node "
        "configuration is not available"]
    calls = (Path(env["FAKE_OUT"]) / "calls").read_text().splitlines()
    assert calls == ["sbatch --test-only --partition=debug cluster/slurm-batch.sh train d.zarr"]
    assert not (Path(env["FAKE_OUT"]) / "srun.env").exists()


def test_outside_a_job_a_job_slurm_will_never_start_is_cancelled_with_its_reason(site):
    root, env = site
    proc = _bash(["train", "d.zarr"], root, {**env, "FAKE_SQUEUE": "PENDING|PartitionConfig"})
    assert proc.returncode == 1
    assert "slurm-batch.sh: error: SLURM will not start job 4242 (PENDING, PartitionConfig)" in proc.stderr
    calls = (Path(env["FAKE_OUT"]) / "calls").read_text().splitlines()
    assert calls[1] == "sbatch --parsable cluster/slurm-batch.sh train d.zarr" and calls[-1] == "scancel 4242"


def test_outside_a_job_the_script_submits_itself_and_follows_the_job(site):
    root, env = site
    proc = _bash(["--", "train", "d.zarr"], root, {**env, "FAKE_SQUEUE": "RUNNING|None"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["slurm-batch.sh: submitted job 4242",
                                        "slurm-batch.sh: job 4242 started; its log: dsvm-4242.out (unless --output "
                                        "says otherwise)"]
    proc = _bash(["train", "d.zarr"], root, {**env, "FAKE_SQUEUE": "PENDING|Resources", "DSVM_SUBMIT_WATCH": "0"})
    assert proc.returncode == 0 and "job 4242 is still PENDING (Resources)" in proc.stdout


# --------------------------------------------------------------------------- the certificates work


def _runner():
    spec = importlib.util.spec_from_file_location("slurm_runner", REPO / "cluster" / "slurm_runner.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tls_config(folder: Path) -> dict:
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    config = {"distributed.comm.require-encryption": True, "distributed.comm.tls.ca-file": cert}
    for role in ("scheduler", "worker", "client"):
        config.update({f"distributed.comm.tls.{role}.cert": cert, f"distributed.comm.tls.{role}.key": key})
    return config


def test_only_a_holder_of_the_jobs_certificate_reaches_its_scheduler(tmp_path):
    import dask.config
    import distributed
    from distributed.security import Security

    from dsvm.app.cluster import SchedulerUnreachableError, connect

    runner = _runner()
    mine, other = tmp_path / "mine", tmp_path / "other"
    assert runner.main(["--make-certificates", str(mine)]) == 0 and runner.main(["--make-certificates", str(other)]) == 0
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in mine.iterdir()} == {"cert.pem": 0o600, "key.pem": 0o600}
    assert runner.main(["--make-certificates", str(mine)]) == 1  # never into a folder that exists
    with dask.config.set(_tls_config(mine)):
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls",
                                      host="127.0.0.1", dashboard_address=None, security=Security()) as cluster:
            address = cluster.scheduler_address
            assert address.startswith("tls://")
            with connect(scheduler_address=address) as client:
                assert client.submit(sum, [1, 2]).result() == 3
            with dask.config.set({"distributed.comm.require-encryption": None, "distributed.comm.tls.ca-file": None,
                                  "distributed.comm.tls.client.cert": None, "distributed.comm.tls.client.key": None}):
                with pytest.raises(SchedulerUnreachableError, match=f"the Dask scheduler at {address} speaks TLS and "
                                                                    "this process has no certificate"):
                    with connect(scheduler_address=address):
                        pass
            with dask.config.set({**_tls_config(other), "dsvm.connect-timeout": 5}):
                with pytest.raises(SchedulerUnreachableError, match=f"cannot reach the Dask scheduler at {address}: "):
                    with connect(scheduler_address=address):
                        pass


@pytest.mark.parametrize("dashboard, link", [("127.0.0.1:8787", "http://127.0.0.1:{port}/status"),
                                             ("[::1]:0", "http://[::1]:{port}/status"),
                                             (":8787", None), ("0.0.0.0:8787", None)])
def test_the_dashboard_is_advertised_where_it_is_bound(dashboard, link):
    """distributed advertised the scheduler's host while the dashboard listened on 127.0.0.1 only."""
    assert _runner().dashboard_link(dashboard) == link


def test_the_script_and_dsvm_give_up_on_the_same_pending_reasons():
    from dsvm.app._cluster_lifecycle import HOPELESS_REASONS

    (line,) = [ln for ln in SCRIPT.read_text().splitlines() if ln.startswith("HOPELESS=")]
    assert set(line.split("=", 1)[1].strip('"').split()) == set(HOPELESS_REASONS)
