#!/usr/bin/env bash
# Start a single-node SLURM (munge + slurmctld + slurmd) on this machine, for
# tests/integration/test_slurm.py.  Debian/Ubuntu only; needs root.  Idempotent: when the
# node already answers as idle it returns at once.  Exits non-zero with one
# clear message when it cannot (not root, no apt, packages unavailable, the
# daemons do not come up); CI then skips the SLURM tests.
#
#   bash .ci/slurm-setup.sh            # install if needed, configure, start
#   DSVM_SLURM_NO_INSTALL=1 bash ...   # never apt-get install, only configure/start
#
# Configuration written to /etc/slurm/slurm.conf (only if the file is absent or
# was written by this script):
#   * one node = this host (CPUs / RealMemory from `slurmd -C`), NodeAddr 127.0.0.1
#   * partition `debug` (Default=YES, MaxTime=INFINITE); no accounts needed
#   * select/cons_tres with CR_Core_Memory, proctrack/linuxproc, task/none
#     (no cgroups: works in containers)
#   * no slurmdbd: AccountingStorageType=accounting_storage/none, so `sacct`
#     has no data; finished jobs are logged by JobCompType=jobcomp/filetxt to
#     /var/log/slurm/jobcomp.log (JobId, JobName, JobState, ...), running
#     jobs are visible in `squeue`.
set -uo pipefail

MARKER="# written by dsvm .ci/slurm-setup.sh"
CONF=/etc/slurm/slurm.conf
LOGDIR=/var/log/slurm
JOBCOMP="$LOGDIR/jobcomp.log"
WAIT_S=${DSVM_SLURM_WAIT:-30}

die() { echo "slurm-setup: $*" >&2; exit 1; }
log() { echo "slurm-setup: $*"; }

node_state() {  # state of this host's node as sinfo reports it ("" if unreachable);
  # a trailing '*' (node not responding) is kept, so "idle*" does not count as up
  timeout 10 sinfo -h -N -n "$(hostname)" -o '%T' 2>/dev/null | head -n1 | tr -d '~#$@+'
}

# Fast path: everything already up.
if command -v sinfo >/dev/null 2>&1; then
  state=$(node_state)
  case "$state" in
    idle|mixed|allocated|completing)
      log "SLURM already running (node $(hostname) is $state)"; exit 0 ;;
  esac
fi

[ "$(id -u)" -eq 0 ] || die "must run as root to install and start munge/slurmctld/slurmd (SLURM tests will be skipped)"

# 1. packages
need_install=0
for b in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/sinfo /usr/bin/sbatch /usr/sbin/munged; do
  [ -x "$b" ] || need_install=1
done
if [ "$need_install" -eq 1 ]; then
  [ -z "${DSVM_SLURM_NO_INSTALL:-}" ] || die "SLURM/munge binaries missing and DSVM_SLURM_NO_INSTALL is set"
  command -v apt-get >/dev/null 2>&1 || die "slurmctld/slurmd/munge are not installed and apt-get is not available"
  log "installing slurmctld slurmd slurm-client munge with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/tmp/dsvm-slurm-apt.log 2>&1 || die "apt-get update failed (see /tmp/dsvm-slurm-apt.log)"
  apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge \
    >>/tmp/dsvm-slurm-apt.log 2>&1 || die "apt-get install slurmctld slurmd slurm-client munge failed (see /tmp/dsvm-slurm-apt.log)"
fi

# 2. munge
id munge >/dev/null 2>&1 || die "user 'munge' does not exist (broken munge package?)"
install -d -o munge -g munge -m 0700 /etc/munge
install -d -o munge -g munge -m 0711 /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  log "creating /etc/munge/munge.key"
  if command -v mungekey >/dev/null 2>&1; then
    mungekey --create --keyfile=/etc/munge/munge.key --force || die "mungekey failed"
  else
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none || die "cannot write munge key"
  fi
fi
chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  if command -v runuser >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged || die "munged did not start (see /var/log/munge/munged.log)"
  else
    su -s /bin/sh munge -c /usr/sbin/munged || die "munged did not start (see /var/log/munge/munged.log)"
  fi
  for _ in $(seq 1 20); do
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && break
    sleep 0.25
  done
  munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 || die "munge credentials do not round-trip (munged not working)"
fi

# 3. slurm.conf
host=$(hostname)
[ -n "$host" ] || die "hostname is empty"
install -d -m 0755 /etc/slurm "$LOGDIR" /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /run/slurm
if [ -f "$CONF" ] && ! grep -qF "$MARKER" "$CONF"; then
  log "$CONF exists and was not written by this script: using it as it is"
else
  # CPUs, sockets, cores, threads and RealMemory as slurmd detects them;
  # keep 1 GiB of RealMemory back for the OS and the test process.
  hw=$(slurmd -C 2>/dev/null | head -n1)
  [ -n "$hw" ] || die "slurmd -C did not report the node's hardware"
  cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
  topo=$(grep -o 'Boards=[0-9]* SocketsPerBoard=[0-9]* CoresPerSocket=[0-9]* ThreadsPerCore=[0-9]*' <<<"$hw")
  [ -n "$cpus" ] && [ -n "$mem" ] || die "cannot parse 'slurmd -C' output: $hw"
  mem=$(( mem > 2048 ? mem - 1024 : mem ))
  new=$(mktemp)
  cat >"$new" <<EOF
$MARKER
# Single-node SLURM for dsvm's tests; regenerate by deleting this file.
ClusterName=dsvm-ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# no slurmdbd: sacct has no data; finished jobs go to the jobcomp log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$JOBCOMP
# quick turnaround for short test jobs
MinJobAge=300
KillWait=5
InactiveLimit=0
Waittime=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus $topo RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO DefMemPerCPU=1024
EOF
  if [ -f "$CONF" ] && cmp -s "$new" "$CONF"; then
    rm -f "$new"
  else
    log "writing $CONF (node $host: CPUs=$cpus RealMemory=$mem)"
    install -m 0644 "$new" "$CONF" && rm -f "$new"
    # a running slurmctld/slurmd must pick up the new file
    for pidfile in /run/slurm/slurmctld.pid /run/slurm/slurmd.pid; do
      [ -f "$pidfile" ] || continue
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null || continue
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    done
  fi
fi

# 4. daemons
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! alive /run/slurm/slurmctld.pid; then
  log "starting slurmctld"
  /usr/sbin/slurmctld || die "slurmctld did not start (see $LOGDIR/slurmctld.log)"
fi
if ! alive /run/slurm/slurmd.pid; then
  log "starting slurmd"
  /usr/sbin/slurmd || die "slurmd did not start (see $LOGDIR/slurmd.log)"
fi

# 5. wait for the node to be idle
deadline=$(( $(date +%s) + WAIT_S ))
while :; do
  state=$(node_state)
  case "$state" in
    idle|mixed|allocated|completing)
      log "SLURM is up: node $host is $state, partition debug"; exit 0 ;;
    down*|drained*|draining*|drain*|fail*|failing*|unknown*)
      scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 ;;
  esac
  if [ "$(date +%s)" -ge "$deadline" ]; then
    die "node $host is '${state:-unreachable}' after ${WAIT_S}s (see $LOGDIR/slurmctld.log and $LOGDIR/slurmd.log)"
  fi
  sleep 0.5
done
