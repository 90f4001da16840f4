#!/usr/bin/env bash
# A real single-host SLURM cluster for tests: munged, MariaDB, slurmdbd, slurmctld and slurmd
# from Debian's packages, configured for this machine and started directly (no systemd).
#
#   workflow/scripts/cluster.sh install   apt-get the packages (root, Debian/Ubuntu)
#   workflow/scripts/cluster.sh start     configure (once) and start every daemon; idempotent
#   workflow/scripts/cluster.sh stop      cancel every job, stop every daemon it started; idempotent
#   workflow/scripts/cluster.sh status    which daemons run, and sinfo
#   workflow/scripts/cluster.sh env       the SLURM_CONF line for a shell: eval "$(... env)"
#
# Everything lives under $RESID_CLUSTER_DIR (default .build/cluster): configuration, the munge
# key and socket, the database, spool, state, logs and pid files. One thing is not: while the
# cluster runs, /etc/slurm/slurm.conf is a link to its configuration, because the executor
# plugin's job steps run `srun` with every SLURM_* variable (SLURM_CONF too) removed, so srun
# reads the default path. A real /etc/slurm/slurm.conf is never touched: start refuses.
# Ports: $RESID_CLUSTER_PORT_BASE (default 16800) + 6 (MariaDB), 17 (slurmctld), 18 (slurmd),
# 19 (slurmdbd).
#
# The cgroup settings the harness needs: ProctrackType=proctrack/linuxproc and
# TaskPlugin=task/none, so a batch job stays in the memory cgroup slurmd was started in and
# the harness (root here) can create and limit a child memory cgroup of its own for each
# cell (grade `hard`). See README.md, "A cluster", for sites that use the cgroup plugins.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
S=$(mkdir -p "${RESID_CLUSTER_DIR:-$ROOT/.build/cluster}" && cd "${RESID_CLUSTER_DIR:-$ROOT/.build/cluster}" && pwd)
BASE=${RESID_CLUSTER_PORT_BASE:-16800}
DB_PORT=$((BASE + 6)) CTLD_PORT=$((BASE + 17)) SLURMD_PORT=$((BASE + 18)) DBD_PORT=$((BASE + 19))
CLUSTER=residency ACCOUNT=residency PARTITION=main
NODE=$(hostname -s)
export SLURM_CONF=$S/etc/slurm.conf
PKGS=(slurm-wlm slurmdbd munge mariadb-server mariadb-client)
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)  # start order; stop runs it backwards

die() { echo "cluster: $*" >&2; exit 1; }
say() { echo "cluster: $*" >&2; }

install() {
  local need=()
  for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
  [ ${#need[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null ||
    die "missing ${need[*]}; install them with: sudo apt-get install -y ${PKGS[*]}"
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null; }
}

pid_of() { [ -s "$S/run/$1.pid" ] && cat "$S/run/$1.pid" || true; }
# Alive: the pid file's process exists and is that daemon (not a later process given the pid).
alive() { local p; p=$(pid_of "$1"); [ -n "$p" ] && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "$1"; }

wait_for() {  # wait_for SECONDS WHAT COMMAND...: poll until COMMAND succeeds
  local t=$1 what=$2; shift 2
  local end=$((SECONDS + t))
  while [ $SECONDS -lt $end ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  die "$what did not come up within ${t}s (logs in $S/log)"
}

mem_mb() { awk '/MemTotal/ {print int($2 / 1024) - 1024}' /proc/meminfo; }

write_slurm_conf() {
  cat >"$S/etc/slurm.conf" <<EOF
# Written by workflow/scripts/cluster.sh for the single host $NODE.
ClusterName=$CLUSTER
SlurmctldHost=$NODE
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/run/munge.socket
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
# The harness makes its own memory cgroup per cell inside the job: SLURM must not move the
# job into a cgroup of its own where the harness could not create children.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
# sacct (the executor plugin's status query) needs the accounting daemon.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$NODE
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$S/run/munge.socket
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=10
InactiveLimit=0
SlurmdTimeout=300
NodeName=$NODE CPUs=$(nproc) RealMemory=$(mem_mb) State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

write_slurmdbd_conf() {
  cat >"$S/etc/slurmdbd.conf" <<EOF
# Written by workflow/scripts/cluster.sh.
AuthType=auth/munge
AuthInfo=socket=$S/run/munge.socket
DbdHost=$NODE
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$S/run/slurmdbd.pid
LogFile=$S/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=residency
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$S/etc/slurmdbd.conf"  # slurmdbd refuses a readable one (it holds the password)
}

ETC_CONF=/etc/slurm/slurm.conf

link_etc() {
  if [ -L "$ETC_CONF" ] && [ ! -e "$ETC_CONF" ]; then rm -f "$ETC_CONF"; fi  # left by a killed test
  if [ -L "$ETC_CONF" ] && [ "$(readlink "$ETC_CONF")" = "$SLURM_CONF" ]; then return 0; fi
  if [ -e "$ETC_CONF" ] || [ -L "$ETC_CONF" ]; then
    die "$ETC_CONF exists and is not this cluster's; the executor's job steps read it, so this script will not run beside it"
  fi
  mkdir -p "$(dirname "$ETC_CONF")"
  ln -s "$SLURM_CONF" "$ETC_CONF"
}

unlink_etc() {
  if [ -L "$ETC_CONF" ] && [ ! -e "$ETC_CONF" ]; then rm -f "$ETC_CONF"; fi  # left by a killed test
  if [ -L "$ETC_CONF" ] && [ "$(readlink "$ETC_CONF")" = "$SLURM_CONF" ]; then rm -f "$ETC_CONF"; fi
}

configure() {
  mkdir -p "$S"/{etc,run,log,state,spool,munge}
  [ -s "$S/munge/munge.key" ] || mungekey --create --keyfile "$S/munge/munge.key" >/dev/null
  chmod 600 "$S/munge/munge.key"
  write_slurm_conf
  write_slurmdbd_conf
  link_etc
  if [ ! -d "$S/db/mysql" ]; then
    mariadb-install-db --no-defaults --datadir="$S/db" --user=root --skip-test-db \
      --auth-root-authentication-method=socket >"$S/log/mariadb-install.log" 2>&1 ||
      die "mariadb-install-db failed (see $S/log/mariadb-install.log)"
  fi
}

start_munged() {
  munged --force --socket="$S/run/munge.socket" --key-file="$S/munge/munge.key" \
    --pid-file="$S/run/munged.pid" --log-file="$S/log/munged.log" --seed-file="$S/munge/seed"
  wait_for 20 munged test -S "$S/run/munge.socket"
}

sql() { mariadb --no-defaults -S "$S/run/mariadb.sock" -u root -e "$1"; }

start_mariadbd() {
  (setsid mariadbd --no-defaults --datadir="$S/db" --socket="$S/run/mariadb.sock" --port="$DB_PORT" \
    --bind-address=127.0.0.1 --skip-name-resolve --pid-file="$S/run/mariadbd.pid" --user=root \
    --log-error="$S/log/mariadb.log" --innodb-buffer-pool-size=64M </dev/null >/dev/null 2>&1 &)
  wait_for 60 MariaDB sql "SELECT 1"
  sql "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'residency';
       GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"
}

start_slurmdbd() {
  slurmdbd
  wait_for 60 slurmdbd timeout 10 sacctmgr -n list cluster
}

# The cluster, an account and this user in the accounting database (sbatch --account needs
# them); each add is a no-op when the entry exists.
accounts() {
  local have
  have=$(sacctmgr -n -P list assoc format=account,user cluster="$CLUSTER")
  grep -qx "$ACCOUNT|$(id -un)" <<<"$have" && return 0
  sacctmgr -i -Q add cluster "$CLUSTER" >/dev/null 2>&1 || true
  sacctmgr -i -Q add account "$ACCOUNT" cluster="$CLUSTER" Description=tests Organization=residency >/dev/null
  sacctmgr -i -Q add user "$(id -un)" account="$ACCOUNT" cluster="$CLUSTER" >/dev/null
  sacctmgr -i -Q modify user "$(id -un)" set DefaultAccount="$ACCOUNT" >/dev/null
}

start_slurmctld() {
  slurmctld
  wait_for 60 slurmctld timeout 10 scontrol ping
}

node_idle() { sinfo -h -n "$NODE" -o %T | grep -Eq '^(idle|mixed|allocated)'; }

start_slurmd() {
  mkdir -p "$S/spool/$NODE"
  slurmd -N "$NODE"
  wait_for 60 "slurmd (node $NODE idle)" node_idle
}

start() {
  install
  configure
  for d in "${DAEMONS[@]}"; do
    alive "$d" || "start_$d"
    [ "$d" = slurmdbd ] && accounts
  done
  scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
  say "up: cluster $CLUSTER, partition $PARTITION, account $ACCOUNT, node $NODE; SLURM_CONF=$SLURM_CONF"
}

stop_daemon() {
  local d=$1 p
  p=$(pid_of "$d")
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 120); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$p" 2>/dev/null && { say "$d ($p) ignored TERM; killing it"; kill -KILL "$p" 2>/dev/null || true; }
  fi
  rm -f "$S/run/$d.pid"
}

stop() {
  [ -d "$S/run" ] || return 0
  if alive slurmctld; then
    scancel --full -u "$(id -un)" >/dev/null 2>&1 || true
    for _ in $(seq 120); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.25; done
  fi
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do stop_daemon "${DAEMONS[i]}"; done
  unlink_etc
  say "stopped"
}

status() {
  local rc=0
  for d in "${DAEMONS[@]}"; do
    if alive "$d"; then echo "$d: running (pid $(pid_of "$d"))"; else echo "$d: stopped"; rc=1; fi
  done
  [ $rc = 0 ] && sinfo
  return $rc
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  *) die "usage: $0 install|start|stop|status|env (got '${1:-}')" ;;
esac
