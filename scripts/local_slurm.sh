#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, for trying the SLURM launcher and for the tests (tests/cluster).
#
#   scripts/local_slurm.sh start [DIR]    # munged, slurmctld, slurmd; waits until the node is idle
#   export SLURM_CONF=DIR/slurm.conf      # printed by start; sinfo, sbatch, srun, squeue then talk to it
#   scripts/local_slurm.sh status [DIR]   # sinfo of the cluster, and which of its daemons run
#   scripts/local_slurm.sh stop [DIR]     # cancels its jobs, stops exactly the daemons start started
#
# DIR (default: $FLEXLEARN_SLURM_DIR, else /tmp/flexlearn-slurm) holds everything: the munge key and socket,
# slurm.conf, the state and spool folders, the daemons' logs and pid files. Nothing under /etc or /run is
# changed and no system service is started; the cluster's ports are free ports chosen at start.
# Needs root (munged runs as the munge user, slurmd as root). When slurmctld, slurmd or munged are missing and
# apt-get is there, start installs Debian's slurm-wlm and munge first.
# Exit status: 0 done; 2 bad usage; 3 the cluster cannot run here (the reason is the last line of stderr).
set -euo pipefail

usage() {
    echo "usage: $0 start|stop|status [DIR]" >&2
    exit 2
}
fail() {
    echo "local_slurm: $*" >&2
    exit 3
}

[[ $# -ge 1 && $# -le 2 ]] || usage
ACTION=$1
DIR=${2:-${FLEXLEARN_SLURM_DIR:-/tmp/flexlearn-slurm}}
case $DIR in /*) ;; *) DIR=$PWD/$DIR ;; esac
CONF=$DIR/slurm.conf
WAIT_S=${LOCAL_SLURM_WAIT_S:-60}

free_port() {
    # a TCP port nobody listens on, from the range the kernel does not hand out to clients
    local p
    for _ in $(seq 200); do
        p=$((20000 + RANDOM % 12000))
        if ! ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
            echo "$p"
            return
        fi
    done
    fail "no free TCP port found in 20000-32000"
}

install_packages() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && return
    [[ $(id -u) -eq 0 ]] || fail "slurm-wlm and munge are not installed and installing them needs root"
    command -v apt-get >/dev/null || fail "slurm-wlm and munge are not installed and there is no apt-get"
    echo "local_slurm: installing slurm-wlm and munge (apt-get)" >&2
    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge) >"$DIR/apt.log" 2>&1 ||
        fail "apt-get install slurm-wlm munge failed (log: $DIR/apt.log)"
}

# pid of a daemon started here, read from its pid file, if it still runs that daemon with this cluster's files
our_pid() {
    local file=$1 name=$2 pid
    [[ -s $file ]] || return 1
    pid=$(tr -dc 0-9 <"$file")
    [[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$name" || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$DIR" || return 1
    echo "$pid"
}

stop_pid() {
    local file=$1 name=$2 pid
    pid=$(our_pid "$file" "$name") || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.2
    done
    kill -KILL "$pid" 2>/dev/null || true
}

start() {
    [[ $(id -u) -eq 0 ]] || fail "starting munged and slurmd needs root (this is uid $(id -u))"
    if [[ -e $DIR/slurmctld.pid ]] && our_pid "$DIR/slurmctld.pid" slurmctld >/dev/null; then
        fail "a cluster already runs from $DIR (stop it first: $0 stop $DIR)"
    fi
    mkdir -p "$DIR"
    chmod 0755 "$DIR"
    install_packages
    rm -rf "$DIR/munge" "$DIR/state" "$DIR/spool"
    mkdir -p "$DIR/munge" "$DIR/state" "$DIR/spool"
    # munge: a fresh key, readable by the munge user only; munged as that user on a socket of its own
    local mu=munge
    id -u "$mu" >/dev/null 2>&1 || mu=root
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1 count=1024 status=none
    chown -R "$mu:" "$DIR/munge"
    chmod 0755 "$DIR/munge"  # the socket's folder: slurm's clients need to reach the socket
    chmod 0400 "$DIR/munge/munge.key"
    local munged=(munged --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket"
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" --seed-file="$DIR/munge/munged.seed")
    if [[ $mu == root ]]; then
        "${munged[@]}" --force || fail "munged did not start (log: $DIR/munge/munged.log)"
    else
        runuser -u "$mu" -- "${munged[@]}" || fail "munged did not start (log: $DIR/munge/munged.log)"
    fi
    local host cpus mem
    host=$(hostname -s)
    cpus=$(nproc --all)
    # RealMemory a little under what slurmd measures, else slurmd drains the node for "low memory"
    mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
    mem=$((mem * 9 / 10))
    cat >"$CONF" <<EOF
# written by scripts/local_slurm.sh: a single-node cluster for tests and trials
ClusterName=flexlearn
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
# cred_expire: also how long a requeued job waits before it may start again (default 120 s)
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=15
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
JobRequeue=1
KillWait=10
MinJobAge=600
SchedulerParameters=sched_interval=2,bf_interval=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF=$CONF
    slurmctld -f "$CONF" -i || fail "slurmctld did not start (log: $DIR/slurmctld.log)"
    slurmd -f "$CONF" || fail "slurmd did not start (log: $DIR/slurmd.log)"
    local state=""
    for _ in $(seq $((WAIT_S * 2))); do
        state=$(sinfo -h -N -o %T 2>/dev/null | head -1 || true)
        [[ $state == idle ]] && break
        sleep 0.5
    done
    if [[ $state != idle ]]; then
        local why
        why=$(tail -n 3 "$DIR/slurmd.log" "$DIR/slurmctld.log" 2>/dev/null | tr '\n' ' ' | cut -c1-400)
        stop
        fail "the node did not become idle within ${WAIT_S} s (state '${state:-none}'; logs: $why)"
    fi
    echo "local_slurm: node $host idle ($cpus CPUs, $mem MB) in $DIR" >&2
    echo "export SLURM_CONF=$CONF"
}

stop() {
    if [[ -f $CONF ]] && our_pid "$DIR/slurmctld.pid" slurmctld >/dev/null; then
        # end the cluster's jobs first, so that no job step outlives the daemons
        local jobs
        jobs=$(SLURM_CONF=$CONF squeue -h -o %A 2>/dev/null || true)
        if [[ -n $jobs ]]; then
            # shellcheck disable=SC2086
            SLURM_CONF=$CONF scancel $jobs 2>/dev/null || true
            for _ in $(seq 60); do
                [[ -z $(SLURM_CONF=$CONF squeue -h -o %A 2>/dev/null || true) ]] && break
                sleep 0.5
            done
        fi
    fi
    stop_pid "$DIR/slurmd.pid" slurmd
    stop_pid "$DIR/slurmctld.pid" slurmctld
    stop_pid "$DIR/munge/munged.pid" munged
    echo "local_slurm: stopped the cluster of $DIR" >&2
}

status() {
    local name file pid
    for name in munged slurmctld slurmd; do
        file=$DIR/$name.pid
        [[ $name == munged ]] && file=$DIR/munge/munged.pid
        if pid=$(our_pid "$file" "$name"); then echo "$name: running (pid $pid)"; else echo "$name: not running"; fi
    done
    [[ -f $CONF ]] && SLURM_CONF=$CONF sinfo 2>&1 || true
}

case $ACTION in
start) start ;;
stop) stop ;;
status) status ;;
*) usage ;;
esac
