#!/usr/bin/env bash
# dsvm as one SLURM batch job: scheduler, client and workers all inside this
# allocation (dask-jobqueue's SLURMRunner, see cluster/slurm_runner.py).
# Submit from the repository root:
#
#   sbatch cluster/slurm-batch.sh                                   # the a9a pipeline
#   sbatch cluster/slurm-batch.sh train data/big.zarr --model big.npz -C 10 --gamma 0.05 -k 2000
#
# Task 0 = Dask scheduler, task 1 = the dsvm command, tasks 2.. = one worker each
# (here 4 tasks -> 2 workers with --cpus-per-task threads).  Adapt partition,
# account, sizes and time to your site; options given to sbatch on the command
# line override the #SBATCH lines below.
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
# (single node).  Empty: the address the host name resolves to.
export DSVM_DASK_INTERFACE=${DSVM_DASK_INTERFACE:-}
# {job_id} is filled in by SLURMRunner; the file must be visible from all nodes
default_file="$PWD/dsvm-scheduler-{job_id}.json"
export DSVM_SCHEDULER_FILE=${DSVM_SCHEDULER_FILE:-$default_file}

if [ "$#" -eq 0 ]; then
  set -- run pipelines/a9a.yaml --set "output=reports/a9a-${SLURM_JOB_ID:-local}"
fi
echo "dsvm job ${SLURM_JOB_ID:-?}: ${SLURM_NTASKS:-?} tasks on ${SLURM_JOB_NODELIST:-?}: dsvm $*"
status=0
srun --kill-on-bad-exit=1 python cluster/slurm_runner.py "$@" || status=$?
rm -f "${DSVM_SCHEDULER_FILE//\{job_id\}/${SLURM_JOB_ID:-}}"
exit "$status"
