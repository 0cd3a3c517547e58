#!/usr/bin/env bash
# dsvm as one SLURM batch job: scheduler, client and workers all inside this
# allocation (dask-jobqueue's SLURMRunner, see cluster/slurm_runner.py).
# Submit from the repository root:
#
#   sbatch cluster/slurm-batch.sh                                   # the a9a pipeline
#   sbatch cluster/slurm-batch.sh train data/big.zarr --model big.npz -C 10 --gamma 0.05 -k 2000
#
# or let the script submit itself, to be told at once when SLURM cannot run the
# job as asked (more CPUs per task than a node has, an unknown partition, ...):
#
#   bash cluster/slurm-batch.sh [--SBATCH-OPTION=VALUE ...] [--] [dsvm arguments]
#
# checks the request with `sbatch --test-only`, submits it, and follows it until
# it starts (DSVM_SUBMIT_WATCH seconds, default 60); it stops with SLURM's own
# reason when SLURM refuses the job or keeps it pending for a reason waiting
# cannot change (the job is then cancelled).
#
# Task 0 = Dask scheduler, task 1 = the dsvm command, tasks 2.. = one worker each
# (here 4 tasks -> 2 workers with --cpus-per-task threads).  Adapt partition,
# account, sizes and time to your site; options given to sbatch on the command
# line override the #SBATCH lines below.
#
# Security (DSVM_DASK_SECURITY): `tls` (the default) makes temporary TLS
# certificates for this job in a folder only your account can read
# (.dsvm-tls-JOBID in the submission directory, which all nodes must see;
# removed when the job ends): scheduler, workers and the dsvm command
# authenticate each other with them and refuse everyone else, on whatever
# interface they listen.  `none` (plain TCP, anyone who reaches the scheduler
# can run code in this job) is accepted only with DSVM_DASK_INTERFACE set, e.g.
# `lo` on a single node.  The job's log says which was chosen.
#
#SBATCH --job-name=dsvm
#SBATCH --ntasks=4
#SBATCH --cpus-per-task=4
#SBATCH --mem-per-cpu=2G
#SBATCH --time=01:00:00
#SBATCH --output=dsvm-%j.out
##SBATCH --partition=compute
##SBATCH --account=myproject
##SBATCH --nodes=2
set -euo pipefail

# SLURM reasons for a pending job that waiting does not change (dsvm.app.cluster_lifecycle.HOPELESS_REASONS)
HOPELESS="PartitionConfig PartitionNodeLimit PartitionTimeLimit BadConstraints InvalidAccount InvalidQOS DependencyNeverSatisfied JobHeldAdmin JobHeldUser"

submit() {  # outside a job: check, submit and follow this script as a batch job
  local opts=() out job line state reason deadline
  while [ "$#" -gt 0 ] && [[ "$1" == -* ]]; do
    if [ "$1" = "--" ]; then shift; break; fi
    opts+=("$1"); shift
  done
  if ! out=$(sbatch --test-only ${opts[@]+"${opts[@]}"} "$0" "$@" 2>&1); then
    out=$(printf '%s\n' "$out" | sed '/^[[:space:]]*$/d' | paste -sd ';' - | sed 's/;/; /g')
    echo "slurm-batch.sh: error: SLURM cannot run this job as asked: ${out:-sbatch --test-only failed}" >&2
    exit 1
  fi
  job=$(sbatch --parsable ${opts[@]+"${opts[@]}"} "$0" "$@")
  job=${job%%;*}
  echo "slurm-batch.sh: submitted job $job"
  deadline=$(( $(date +%s) + ${DSVM_SUBMIT_WATCH:-60} ))
  while :; do
    line=$(squeue -h --states=all -j "$job" -o '%T|%r' 2>/dev/null || true)
    state=${line%%|*} reason=${line#*|}
    case "$state" in
      RUNNING|COMPLETING|COMPLETED|"")
        echo "slurm-batch.sh: job $job started; its log: dsvm-$job.out (unless --output says otherwise)"; exit 0 ;;
      PENDING|CONFIGURING|REQUEUED) ;;
      *) echo "slurm-batch.sh: error: job $job is $state ($reason); see its log" >&2; exit 1 ;;
    esac
    if [ "$state" = PENDING ] && [[ " $HOPELESS " == *" $reason "* ]]; then
      scancel "$job" || true
      echo "slurm-batch.sh: error: SLURM will not start job $job (PENDING, $reason): ask for what the partition has (--ntasks, --cpus-per-task, --mem-per-cpu, --time, --partition, --account); the job was cancelled" >&2
      exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "slurm-batch.sh: job $job is still $state ($reason); it starts when SLURM has room (squeue -j $job)"
      exit 0
    fi
    sleep 2
  done
}

if [ -z "${SLURM_JOB_ID:-}" ]; then
  submit "$@"
fi

cd "${SLURM_SUBMIT_DIR:-.}"
# The same Python environment on every node: a virtualenv on a shared file
# system (or `module load` / `conda activate` here).
if [ -f .venv/bin/activate ]; then
  . .venv/bin/activate
fi

# glibc malloc and numpy settings for the workers, which run in these tasks' processes
# (see dsvm.app.cluster.WORKER_MALLOC_ENV and WORKER_NUMPY_ENV)
export MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-16777216}
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-16777216}
export NUMPY_MADVISE_HUGEPAGE=${NUMPY_MADVISE_HUGEPAGE:-0}

# Fast network between nodes, e.g. ib0; `lo` keeps everything on 127.0.0.1
# (single node).  Empty: all interfaces (protected by TLS, below).
export DSVM_DASK_INTERFACE=${DSVM_DASK_INTERFACE:-}
# {job_id} is filled in by SLURMRunner; the file must be visible from all nodes
default_file="$PWD/dsvm-scheduler-{job_id}.json"
export DSVM_SCHEDULER_FILE=${DSVM_SCHEDULER_FILE:-$default_file}
job_id=${SLURM_JOB_ID}
listening=${DSVM_DASK_INTERFACE:-all interfaces}

tls_dir=
case "${DSVM_DASK_SECURITY:=tls}" in
  tls)
    tls_dir="$PWD/.dsvm-tls-$job_id"
    python cluster/slurm_runner.py --make-certificates "$tls_dir"   # fails on a folder that exists
    trap 'rm -rf "$tls_dir"' EXIT
    export DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True
    export DASK_DISTRIBUTED__COMM__TLS__CA_FILE="$tls_dir/cert.pem"
    for role in SCHEDULER WORKER CLIENT; do
      export "DASK_DISTRIBUTED__COMM__TLS__${role}__CERT=$tls_dir/cert.pem"
      export "DASK_DISTRIBUTED__COMM__TLS__${role}__KEY=$tls_dir/key.pem"
    done
    echo "dsvm job $job_id: security: TLS with temporary certificates made for this job ($tls_dir, readable by you only, removed at the end): the scheduler ($listening) accepts only this job's processes"
    ;;
  none)
    if [ -z "$DSVM_DASK_INTERFACE" ]; then
      echo "dsvm job $job_id: error: DSVM_DASK_SECURITY=none needs DSVM_DASK_INTERFACE (e.g. lo): without TLS the scheduler would accept code from anyone on any network" >&2
      exit 1
    fi
    echo "dsvm job $job_id: security: NONE (DSVM_DASK_SECURITY=none): anyone who reaches interface $DSVM_DASK_INTERFACE of the scheduler's node can run code in this job"
    ;;
  *)
    echo "dsvm job $job_id: error: DSVM_DASK_SECURITY=$DSVM_DASK_SECURITY: use tls (the default) or none" >&2
    exit 1
    ;;
esac

if [ "$#" -eq 0 ]; then
  set -- run pipelines/a9a.yaml --set "output=reports/a9a-$job_id"
fi
echo "dsvm job $job_id: ${SLURM_NTASKS:-?} tasks on ${SLURM_JOB_NODELIST:-?}: dsvm $*"
status=0
srun --kill-on-bad-exit=1 python cluster/slurm_runner.py "$@" || status=$?
rm -f "${DSVM_SCHEDULER_FILE//\{job_id\}/$job_id}"
exit "$status"
