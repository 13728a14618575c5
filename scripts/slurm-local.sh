#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for `truecold fleet` and its tests
# (docs/fleet.md, "A cluster on one machine"):
#   scripts/slurm-local.sh start DIR   munged, slurmctld and slurmd with every file under DIR
#                                      (key, sockets, state, spool, logs, pid files); prints
#                                      the line to source: export SLURM_CONF=DIR/slurm.conf
#   scripts/slurm-local.sh stop DIR    stops the three daemons DIR's pid files name
# Debian 12's slurm-wlm 22.05 and munge 0.5 (installed here when missing; needs root). One
# node, `localhost`, with this machine's CPUs and memory (less 1 GiB), in one partition
# (TRUECOLD_SLURM_PARTITION, default `fleet`); no cgroups (proctrack/linuxproc, task/none),
# so a task's memory is enforced by the accounting poll (jobacct_gather/linux with
# OverMemoryKill, every second): a task above its --mem is killed and its log says
# "exceeded memory limit". The daemons run as root; their ports are TRUECOLD_SLURM_PORT and
# the next one (default 16817, 16818), so the machine's own Slurm, if any, is left alone.
set -euo pipefail
usage() { echo "usage: scripts/slurm-local.sh start|stop DIR" >&2; exit 125; }
(($# == 2)) || usage
cmd=$1
dir=$2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd -P)
conf=$dir/slurm.conf

stop_pid() { # $1 = pid file, $2 = name: SIGTERM, then up to 20 s for the process to go
  local f=$1 pid
  [[ -s $f ]] || return 0
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "slurm-local: $2 (pid $pid) did not stop on SIGTERM; SIGKILL" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$f"
}

case $cmd in
stop)
  stop_pid "$dir/slurmd.pid" slurmd
  stop_pid "$dir/slurmctld.pid" slurmctld
  stop_pid "$dir/munge/munged.pid" munged
  echo "slurm-local: stopped (state left in $dir)"
  exit 0
  ;;
start) ;;
*) usage ;;
esac

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
if ! installed slurm-wlm || ! installed munge; then
  export DEBIAN_FRONTEND=noninteractive
  removes=$(apt-get install -s -q --no-install-recommends slurm-wlm munge 2>&1 | awk '$1 == "Remv" { print $2 }')
  [[ -z $removes ]] || { echo "slurm-local: installing slurm-wlm munge would remove: $removes" >&2; exit 1; }
  apt-get install -y -q --no-install-recommends --no-remove slurm-wlm munge >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends --no-remove slurm-wlm munge >/dev/null; }
fi
for b in munged mungekey slurmctld slurmd scontrol sinfo; do
  command -v "$b" >/dev/null || { echo "slurm-local: $b is not installed (slurm-wlm, munge)" >&2; exit 1; }
done

port=${TRUECOLD_SLURM_PORT:-16817}
partition=${TRUECOLD_SLURM_PARTITION:-fleet}
[[ $partition =~ ^[A-Za-z0-9_-]+$ ]] || { echo "slurm-local: partition name '$partition'" >&2; exit 125; }
cpus=$(nproc)
mem_mib=$(( $(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) / 1024 - 1024 ))

# munge: its own key (munged refuses a key or socket directory others can write), its own
# socket; slurm's auth/munge and cred/munge reach it through AuthInfo.
mkdir -p "$dir/munge" "$dir/munge-key" "$dir/state" "$dir/spool" "$dir/log"
chmod 700 "$dir/munge-key"
chmod 755 "$dir/munge"
[[ -s $dir/munge-key/munge.key ]] || mungekey --create --keyfile="$dir/munge-key/munge.key"
stop_pid "$dir/munge/munged.pid" munged
munged --force --key-file="$dir/munge-key/munge.key" --socket="$dir/munge/munge.sock" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/munged.seed"

cat >"$conf" <<EOF
# Written by scripts/slurm-local.sh: a single-node cluster for truecold fleet.
ClusterName=truecold-local
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MpiDefault=none
MinJobAge=3600
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mib State=UNKNOWN
PartitionName=$partition Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
export SLURM_CONF=$conf
stop_pid "$dir/slurmd.pid" slurmd
stop_pid "$dir/slurmctld.pid" slurmctld
# -c: a clean start (no jobs of an earlier run of this directory); -i: ignore old state.
slurmctld -c -f "$conf"
slurmd -f "$conf"
for _ in $(seq 1 300); do
  if scontrol ping 2>/dev/null | grep -q "is UP" &&
    [[ $(sinfo -h -p "$partition" -o %t 2>/dev/null) == idle* ]]; then
    echo "slurm-local: up: partition $partition, node localhost ($cpus CPUs, $mem_mib MiB)"
    echo "export SLURM_CONF=$conf"
    exit 0
  fi
  sleep 0.1
done
echo "slurm-local: the cluster did not come up in 30 s; logs in $dir/log" >&2
tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
exit 1
