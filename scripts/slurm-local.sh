#!/usr/bin/env bash
# A real Slurm on this one machine, for the Slurm tests: munged, slurmctld and slurmd with a
# configuration, state, logs and pid files under DIR; no systemd needed.
#
#   scripts/slurm-local.sh start DIR   # starts the daemons, waits until the node is idle
#   scripts/slurm-local.sh stop DIR    # stops the daemons this script started
#
# Then `export SLURM_CONF=DIR/slurm.conf` and sbatch, srun, squeue and scontrol talk to it.
# The node (this machine's short host name) claims 8 CPUs (SlurmdParameters=config_overrides), so jobs of several
# tasks run on a 2-core machine. A second partition, `gpu`, describes 128 nodes of 8 GPUs that
# never start (State=FUTURE): enough for `sbatch --test-only` to judge a large job's request.
# Where Slurm is not installed, start says so on stdout and exits 0 without writing
# DIR/slurm.conf; the tests skip then. Any other failure exits 1 with the daemons' log tail.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
action=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
conf=$dir/slurm.conf

stop() {
  for daemon in slurmd slurmctld; do
    local pidfile=$dir/$daemon.pid
    [[ -f $pidfile ]] || continue
    local pid
    pid=$(cat "$pidfile")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
}

fail() {
  echo "slurm-local: error: $1" >&2
  for log in "$dir"/slurmctld.log "$dir"/slurmd.log; do
    [[ -f $log ]] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }
  done
  stop
  exit 1
}

start() {
  for tool in slurmctld slurmd munged sinfo; do
    if ! command -v "$tool" >/dev/null 2>&1 && [[ ! -x /usr/sbin/$tool ]]; then
      echo "slurm-local: Slurm is not installed ($tool missing): apt-get install slurm-wlm munge"
      rm -f "$conf"
      exit 0
    fi
  done
  stop
  rm -rf "$dir/state" "$dir/spool"
  mkdir -p "$dir/state" "$dir/spool"
  local user node
  user=$(id -un)
  # slurmd finds its node by the short host name (a node named localhost would not do: Slurm
  # then takes every other node line's first host for a duplicate of this one).
  node=$(hostname -s)
  cat >"$conf" <<EOF
# Written by scripts/slurm-local.sh for the tests; not a production configuration.
ClusterName=megatron-test
SlurmctldHost=localhost
SlurmUser=$user
SlurmdUser=root
AuthType=auth/munge
# A requeued job waits cred_expire seconds before it may start again (120 by default).
AuthInfo=cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldPort=${MEGATRON_SLURMCTLD_PORT:-6817}
SlurmdPort=${MEGATRON_SLURMD_PORT:-6818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
GresTypes=gpu
SuspendProgram=/bin/true
ResumeProgram=/bin/true
SuspendTime=600
SuspendExcNodes=$node
ResumeTimeout=600
SchedulerParameters=sched_interval=1
MinJobAge=600
EnforcePartLimits=ALL
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 RealMemory=20000 State=UNKNOWN
NodeName=gpu[001-128] NodeAddr=127.0.1.[1-128] Port=9 CPUs=64 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=1000000 Gres=gpu:8 State=CLOUD
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=gpu[001-128] MaxTime=14-00:00:00 State=UP
EOF
  # munged must run as its own user; one already running (the system's) serves as well.
  if ! munge -n >/dev/null 2>&1; then
    install -d -o munge -g munge /run/munge
    runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
  fi
  export SLURM_CONF=$conf
  /usr/sbin/slurmctld -f "$conf" || fail "slurmctld did not start"
  /usr/sbin/slurmd -f "$conf" || fail "slurmd did not start"
  for _ in $(seq 200); do
    local state
    state=$(sinfo -h -n "$node" -N -o %T 2>/dev/null || true)
    if [[ $state == idle ]]; then
      echo "slurm-local: Slurm $(sinfo -V | awk '{print $2}') is up: export SLURM_CONF=$conf"
      return 0
    fi
    sleep 0.1
  done
  fail "the node did not become idle within 20 s (sinfo: ${state:-no answer})"
}

case $action in
  start) start ;;
  stop) stop; echo "slurm-local: stopped" ;;
  *) usage ;;
esac
