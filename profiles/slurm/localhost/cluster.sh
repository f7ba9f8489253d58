#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine (munge + slurmctld + slurmd), for tests and CI.
#
#   profiles/slurm/localhost/cluster.sh start    install (apt, as root) if needed, start the daemons, wait until idle
#   profiles/slurm/localhost/cluster.sh stop     cancel jobs, stop the daemons this script started (by PID file)
#   profiles/slurm/localhost/cluster.sh status   exit 0 when the node answers and is usable
#   profiles/slurm/localhost/cluster.sh env      print the `export SLURM_CONF=...` line clients need
#
# Everything lives in $VERTEBRAE_SLURM_DIR (default /tmp/vertebrae-slurm): slurm.conf, state, spool, logs and
# PID files. slurm.conf is also linked from /etc/slurm/slurm.conf (unless another one is there), because the
# commands Snakemake runs inside a job (srun) read the default location, not $SLURM_CONF. Accounting is off, so Snakemake's SLURM plugin must poll with squeue (`slurm-status-command: squeue`
# in profiles/slurm/localhost/config.yaml); without it the plugin waits for sacct forever. MinJobAge=300 keeps
# finished jobs visible to squeue long enough. Daemons are stopped by their PID files, never by name.
set -euo pipefail

DIR="${VERTEBRAE_SLURM_DIR:-/tmp/vertebrae-slurm}"
CONF="$DIR/slurm.conf"
SYSTEM_CONF=/etc/slurm/slurm.conf
NODE="$(hostname -s)"
CTLD_PORT="${VERTEBRAE_SLURMCTLD_PORT:-6817}"
SLURMD_PORT="${VERTEBRAE_SLURMD_PORT:-6818}"
# Advertised CPUs (config_overrides): more job slots than the real cores, since a workflow job mostly waits.
NODE_CPUS="${VERTEBRAE_SLURM_CPUS:-4}"
export SLURM_CONF="$CONF"

log() { echo "cluster.sh: $*" >&2; }

pid_alive() {  # pid_alive FILE: the PID in FILE is a running process
    [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

install_packages() {
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
        && command -v munged >/dev/null && return 0
    if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
        log "SLURM is not installed and cannot be installed here (needs root and apt-get)"
        return 3
    fi
    log "installing slurmctld slurmd slurm-client munge"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        slurmctld slurmd slurm-client munge >"$DIR/apt.log" 2>&1 || {
        DEBIAN_FRONTEND=noninteractive apt-get update >>"$DIR/apt.log" 2>&1
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            slurmctld slurmd slurm-client munge >>"$DIR/apt.log" 2>&1
    }
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0  # a munged already serves this machine; not ours to stop
    fi
    [[ -s /etc/munge/munge.key ]] || { runuser -u munge -- /usr/sbin/mungekey --create 2>/dev/null || \
        /usr/sbin/create-munge-key -f; }
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    chmod 0755 /run/munge
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
    cp /run/munge/munged.pid "$DIR/munged.pid"
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    log "munged did not come up"
    return 1
}

write_conf() {
    local memory
    memory=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
    memory=$((memory > 4000 ? memory - 2000 : memory / 2))  # leave room for the OS and the daemons
    mkdir -p "$DIR/state" "$DIR/spool"
    cat >"$CONF" <<EOF
# Written by profiles/slurm/localhost/cluster.sh: one node, no cgroups, no accounting.
ClusterName=vertebrae
SlurmctldHost=$NODE
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MinJobAge=300
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$NODE_CPUS RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    if [[ -L "$SYSTEM_CONF" || ! -e "$SYSTEM_CONF" ]]; then
        mkdir -p "$(dirname "$SYSTEM_CONF")"
        ln -sfn "$CONF" "$SYSTEM_CONF"
    elif [[ "$(readlink -f "$SYSTEM_CONF")" != "$CONF" ]]; then
        log "$SYSTEM_CONF belongs to another cluster; jobs would not find this one"
        return 1
    fi
}

node_ready() {
    local state
    state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null | head -1) || return 1
    [[ "$state" == idle* || "$state" == mixed* || "$state" == allocated* ]]
}

start() {
    local t0=$SECONDS
    mkdir -p "$DIR"
    if pid_alive "$DIR/slurmctld.pid" && pid_alive "$DIR/slurmd.pid" && node_ready; then
        log "already running ($DIR)"
        return 0
    fi
    install_packages
    start_munge
    write_conf
    pid_alive "$DIR/slurmctld.pid" || slurmctld -f "$CONF" -i
    pid_alive "$DIR/slurmd.pid" || slurmd -f "$CONF"
    for _ in $(seq 300); do
        if node_ready; then
            log "node $NODE ready after $((SECONDS - t0)) s (SLURM_CONF=$CONF)"
            return 0
        fi
        sleep 0.1
    done
    log "node $NODE not ready after 30 s; see $DIR/slurmctld.log and $DIR/slurmd.log"
    sinfo -N -l >&2 || true
    return 1
}

stop_pid() {  # stop_pid FILE: TERM, then KILL after 10 s, the process whose PID FILE holds
    local file=$1 pid
    [[ -s "$file" ]] || return 0
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
}

stop() {
    [[ -f "$CONF" ]] || { log "nothing to stop ($DIR)"; return 0; }
    if pid_alive "$DIR/slurmctld.pid"; then
        timeout -s KILL 10 scancel --full --quiet --partition debug 2>/dev/null || true
    fi
    stop_pid "$DIR/slurmd.pid"
    stop_pid "$DIR/slurmctld.pid"
    stop_pid "$DIR/munged.pid"
    if [[ "$(readlink "$SYSTEM_CONF" 2>/dev/null)" == "$CONF" ]]; then rm -f "$SYSTEM_CONF"; fi
    log "stopped ($DIR)"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) pid_alive "$DIR/slurmctld.pid" && pid_alive "$DIR/slurmd.pid" && node_ready ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) echo "usage: $0 start|stop|status|env" >&2; exit 64 ;;
esac
