#!/usr/bin/env bash
# A local three-node RabbitMQ cluster for the chaos runs (`make chaos`),
# beside the single brokers of scripts/services.sh, which it never touches.
#
# The nodes run RabbitMQ 4.3.6 — the version issue 21 measured a cluster on —
# from the chroot scripts/services.sh builds for the single 4.3 broker
# (DLQBOT_RABBIT43_ROOT, default /var/lib/dlqbot/rabbit43; when it is missing
# this script runs scripts/services.sh first, which builds it). The host's
# 3.10 could run a cluster too, but a 3.10 quorum queue counts give-backs
# differently and is not what production runs any more.
#
#   node    AMQP              management         dist
#   dlqc1   127.0.0.1:5691    127.0.0.1:15691    25691
#   dlqc2   127.0.0.1:5692    127.0.0.1:15692    25692
#   dlqc3   127.0.0.1:5693    127.0.0.1:15693    25693
#
# All three are <name>@localhost, share one Erlang cookie, use their own epmd
# on port 4372 (the single brokers use 4369–4371) and keep their data, logs,
# config and pid file in /var/lib/dlqbot/cluster/<name> (DLQBOT_CLUSTER_DIR),
# bind-mounted into the chroot at /cluster. Each node is configured through
# RABBITMQ_CONFIG_FILE, RABBITMQ_CONF_ENV_FILE, RABBITMQ_MNESIA_BASE,
# RABBITMQ_LOG_BASE, RABBITMQ_ENABLED_PLUGINS_FILE and RABBITMQ_PID_FILE,
# never /etc/rabbitmq (the single 4.3's). guest/guest works from 127.0.0.1.
#
# `start` launches every node that is down at once and then waits for all
# three (DLQBOT_CLUSTER_WAIT seconds, default 600): a node of a formed
# cluster cannot finish booting until a majority of its metadata store
# (Khepri) runs, so nodes started one after the other, each waited for, hang
# after a stop or a reboot. When all three answer and are joined, `start`
# changes nothing and runs no Erlang tool (about a second).
#
# usage: scripts/cluster.sh start          start the nodes that are down and join them (idempotent)
#        scripts/cluster.sh stop           stop all three (their data stays)
#        scripts/cluster.sh status         which nodes run, and the cluster's members
#        scripts/cluster.sh kill NODE      SIGKILL one node (dlqc1, dlqc2 or dlqc3)
#        scripts/cluster.sh stop-node NODE   stop one node gracefully (rabbitmqctl stop)
#        scripts/cluster.sh start-node NODE  start one node again and wait until it answers
#        scripts/cluster.sh reset          stop, delete the data, start a fresh cluster
# Needs root (chroot, mount). Prints what it did.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=${DLQBOT_RABBIT43_ROOT:-/var/lib/dlqbot/rabbit43}
DIR=${DLQBOT_CLUSTER_DIR:-/var/lib/dlqbot/cluster}
NODES=(dlqc1 dlqc2 dlqc3)
WAIT=${DLQBOT_CLUSTER_WAIT:-600}
EPMD=4372
COOKIE=DLQBOTCLUSTERCOOKIE

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

index() { # index NODE → 1, 2 or 3
  case "$1" in dlqc1) echo 1 ;; dlqc2) echo 2 ;; dlqc3) echo 3 ;; *) die "unknown node '$1' (want dlqc1, dlqc2 or dlqc3)" ;; esac
}
amqp_port() { echo $((5690 + $(index "$1"))); }
mgmt_port() { echo $((15690 + $(index "$1"))); }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# in_node NODE CMD…: run CMD (rabbitmq-server, rabbitmqctl…) in the chroot as
# rabbitmq with NODE's environment. It calls the scripts in
# /usr/lib/rabbitmq/bin, not Debian's wrappers in /usr/sbin: those cd to
# /var/lib/rabbitmq, take its cookie and write /var/log/rabbitmq (the single
# 4.3's).
in_node() {
  local n=$1; shift
  chroot "$ROOT" su -s /bin/sh rabbitmq -c "cd /cluster/$n && \
    HOME=/cluster/home ERL_EPMD_PORT=$EPMD \
    RABBITMQ_NODENAME=$n@localhost \
    RABBITMQ_CONF_ENV_FILE=/cluster/$n/rabbitmq-env.conf \
    RABBITMQ_CONFIG_FILE=/cluster/$n/rabbitmq.conf \
    RABBITMQ_ADVANCED_CONFIG_FILE=/cluster/$n/advanced.config \
    RABBITMQ_ENABLED_PLUGINS_FILE=/cluster/$n/enabled_plugins \
    RABBITMQ_MNESIA_BASE=/cluster/$n/mnesia \
    RABBITMQ_LOG_BASE=/cluster/$n/log \
    RABBITMQ_PID_FILE=/cluster/$n/pid \
    RABBITMQ_DIST_PORT=$((25690 + $(index "$n"))) \
    /usr/lib/rabbitmq/bin/$*" 9>&- # the VM it launches must not hold the lock
}

prepare() {
  if [ ! -x "$ROOT/usr/sbin/rabbitmq-server" ]; then
    log "no RabbitMQ 4.3 chroot in $ROOT: running scripts/services.sh to build it"
    scripts/services.sh rabbit43 >&2 9>&- || die "scripts/services.sh could not build $ROOT"
    [ -x "$ROOT/usr/sbin/rabbitmq-server" ] || die "$ROOT/usr/sbin/rabbitmq-server is still missing"
  fi
  mkdir -p "$DIR" "$ROOT/cluster"
  mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
  if ! mountpoint -q "$ROOT/cluster"; then
    mount --bind "$DIR" "$ROOT/cluster"
    log "mounted $DIR at $ROOT/cluster"
  fi
  mkdir -p "$DIR/home"
  if [ ! -f "$DIR/home/.erlang.cookie" ]; then
    printf %s "$COOKIE" >"$DIR/home/.erlang.cookie"
  fi
  local n
  for n in "${NODES[@]}"; do
    mkdir -p "$DIR/$n/mnesia" "$DIR/$n/log"
    cat >"$DIR/$n/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$(amqp_port "$n")
management.tcp.port = $(mgmt_port "$n")
management.tcp.ip = 127.0.0.1
loopback_users = none
# A killed node's consumers' messages return once it is back or forgotten;
# keep the statistics interval at its default (5 s), as in production.
CONF
    : >"$DIR/$n/rabbitmq-env.conf"
    echo '[rabbitmq_management].' >"$DIR/$n/enabled_plugins"
  done
  chroot "$ROOT" chown -R rabbitmq:rabbitmq /cluster
  chmod 400 "$DIR/home/.erlang.cookie"
}

# vm_pid NODE: the pid of NODE's Erlang VM (booting or up) from its pid
# file, checked against the process's environment (a killed node leaves a
# stale file; a reused pid is another process); false when none runs. It
# needs no Erlang, so it is instant under any load.
vm_pid() {
  local pid
  pid=$(cat "$DIR/$1/pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && grep -qzx "RABBITMQ_NODENAME=$1@localhost" "/proc/$pid/environ" 2>/dev/null || return 1
  echo "$pid"
}

answers() { # answers NODE: its AMQP port and its management API answer
  port_open "$(amqp_port "$1")" &&
    curl -sf -m 10 -u guest:guest "http://127.0.0.1:$(mgmt_port "$1")/api/overview" >/dev/null 2>&1
}

running() { answers "$1" || vm_pid "$1" >/dev/null; }

# wait_up NODE…: until every NODE answers, at most $WAIT seconds in all
# (DLQBOT_CLUSTER_WAIT, default 600: a 4.3 node boots in about 10 s on an
# idle machine, minutes on two cores at load 20). It says every 30 s which
# nodes it still waits for; at the deadline it shows the end of their logs.
wait_up() {
  local deadline=$((SECONDS + WAIT)) next=$((SECONDS + 30)) n left
  while :; do
    left=()
    for n in "$@"; do answers "$n" || left+=("$n"); done
    [ ${#left[@]} -eq 0 ] && return 0
    if [ $SECONDS -ge $deadline ]; then
      for n in "${left[@]}"; do
        log "$n: the VM $(vm_pid "$n" >/dev/null && echo runs || echo is gone); the end of $DIR/$n/log/$n@localhost.log:"
        tail -5 "$DIR/$n/log/$n@localhost.log" 2>/dev/null | cut -c1-300 >&2
        tail -5 "$DIR/$n/log/startup_log" 2>/dev/null >&2
      done
      die "${left[*]} did not answer within $WAIT s (DLQBOT_CLUSTER_WAIT; logs in $DIR/<node>/log)"
    fi
    if [ $SECONDS -ge $next ]; then
      log "waiting for ${left[*]} to answer ($((deadline - SECONDS)) s left)"
      next=$((SECONDS + 30))
    fi
    sleep 1
  done
}

launch() { # launch NODE: start NODE's VM, detached (wait_up waits for it)
  in_node "$1" rabbitmq-server -detached ">>/cluster/$1/log/startup_log" "2>&1"
}

# start_nodes NODE…: start those of NODE… that do not run, all at once, then
# wait until all of NODE… answer. All at once, because a node of a formed
# cluster does not finish booting alone: its metadata store (Khepri, a Raft
# group over the three nodes) waits for a majority, so starting the nodes
# one after the other, each waited for, never ends (after `stop`, or a
# reboot). STARTED lists the nodes it started.
STARTED=()
start_nodes() {
  local n
  STARTED=()
  for n in "$@"; do
    if ! running "$n"; then
      launch "$n"
      STARTED+=("$n")
    fi
  done
  wait_up "$@"
}

members() { # members NODE: the running nodes the cluster reports, one a line
  curl -sf -m 10 -u guest:guest "http://127.0.0.1:$(mgmt_port "$1")/api/nodes?columns=name,running" |
    tr '}' '\n' | sed -nE 's/.*"name":"([^"]+)","running":true.*/\1/p'
}

joined() { # joined NODE: NODE is a member of dlqc1's cluster (running or not)
  curl -sf -m 10 -u guest:guest "http://127.0.0.1:$(mgmt_port dlqc1)/api/nodes?columns=name" |
    grep -q "\"$1@localhost\""
}

# join NODE: make NODE (a fresh node, booted alone) a member of dlqc1's
# cluster. join_cluster can time out on a loaded machine: it is tried
# three times.
join() {
  local n=$1 i
  in_node "$n" rabbitmqctl -q stop_app >/dev/null
  in_node "$n" rabbitmqctl -q reset >/dev/null
  for i in 1 2 3; do
    if in_node "$n" rabbitmqctl -q -t 120 join_cluster dlqc1@localhost >/dev/null; then break; fi
    [ $i -lt 3 ] || die "$n could not join dlqc1's cluster"
    log "join_cluster $n failed; trying again"
    sleep 5
  done
  in_node "$n" rabbitmqctl -q start_app >/dev/null
  wait_up "$n"
}

# cmd_start starts what does not run and joins what is not joined. When all
# three answer and are joined it changes nothing and takes about a second
# (no Erlang CLI is run). Two at once are serialised by a lock.
cmd_start() {
  local did=() n
  if all_up_and_joined; then
    log "all three nodes run and are joined; changed nothing"
    return
  fi
  prepare
  start_nodes "${NODES[@]}"
  for n in ${STARTED[@]+"${STARTED[@]}"}; do
    did+=("started $n on :$(amqp_port "$n") (management :$(mgmt_port "$n"))")
  done
  for n in dlqc2 dlqc3; do
    if ! joined "$n"; then
      join "$n"
      did+=("joined $n to dlqc1's cluster")
    fi
  done
  if [ ${#did[@]} -eq 0 ]; then
    log "all three nodes run and are joined; changed nothing"
  else
    for d in "${did[@]}"; do log "$d"; done
  fi
}

all_up_and_joined() {
  local n
  for n in "${NODES[@]}"; do answers "$n" || return 1; done
  joined dlqc2 && joined dlqc3
}

# stop_node NODE: stop NODE gracefully (rabbitmqctl stop, which also halts
# a node still booting); SIGKILL its VM if it is still there a minute later.
stop_node() {
  local n=$1 i pid
  in_node "$n" rabbitmqctl -q -t 120 stop >/dev/null 2>&1 || true
  for ((i = 0; i < 60; i++)); do
    vm_pid "$n" >/dev/null || return 0
    sleep 1
  done
  pid=$(vm_pid "$n") && kill -KILL "$pid" && log "$n did not stop within 60 s: SIGKILLed it (pid $pid)"
  return 0
}

cmd_stop() {
  mountpoint -q "$ROOT/cluster" 2>/dev/null || { log "not set up; nothing to stop"; return; }
  local n any=0
  for n in "${NODES[@]}"; do
    if running "$n"; then
      stop_node "$n"
      log "stopped $n"; any=1
    fi
  done
  [ $any -eq 1 ] || log "no node was running; changed nothing"
}

cmd_status() {
  mountpoint -q "$ROOT/cluster" 2>/dev/null || { log "not set up (scripts/cluster.sh start)"; exit 1; }
  local n up=0
  for n in "${NODES[@]}"; do
    if answers "$n"; then
      echo "$n@localhost up: amqp://guest:guest@127.0.0.1:$(amqp_port "$n")/ http://guest:guest@127.0.0.1:$(mgmt_port "$n")"
      up=$n
    elif vm_pid "$n" >/dev/null; then
      echo "$n@localhost booting (its VM runs, it does not answer yet)"
    else
      echo "$n@localhost down"
    fi
  done
  if [ "$up" != 0 ]; then
    echo "running members (as $up sees them): $(members "$up" | tr '\n' ' ')"
  fi
}

cmd_kill() {
  local n=${1:?usage: scripts/cluster.sh kill NODE}
  index "$n" >/dev/null
  local pid
  if ! pid=$(vm_pid "$n"); then
    log "$n is not running; killed nothing"
    return
  fi
  kill -KILL "$pid"
  log "SIGKILLed $n (pid $pid)"
}

cmd_start_node() {
  local n=${1:?usage: scripts/cluster.sh start-node NODE}
  index "$n" >/dev/null
  prepare >/dev/null
  start_nodes "$n"
  if [ ${#STARTED[@]} -eq 1 ]; then log "started $n"; else log "$n runs already; changed nothing"; fi
}

cmd_stop_node() {
  local n=${1:?usage: scripts/cluster.sh stop-node NODE}
  index "$n" >/dev/null
  if running "$n"; then
    stop_node "$n"
    log "stopped $n"
  else
    log "$n is not running; changed nothing"
  fi
}

cmd_reset() {
  cmd_stop
  rm -rf "${DIR:?}"/dlqc1 "${DIR:?}"/dlqc2 "${DIR:?}"/dlqc3
  log "deleted the nodes' data in $DIR"
  cmd_start
}

[ "$(id -u)" -eq 0 ] || die "needs root (chroot, mount)"
# One change at a time: two starts (two chaos runs, a run and a person)
# would launch a node twice or join it twice.
lock() { mkdir -p "$DIR"; exec 9>"$DIR/.lock"; flock 9; }
case "${1:-}" in
start) lock; cmd_start ;;
stop) lock; cmd_stop ;;
status) cmd_status ;;
kill) cmd_kill "${2:-}" ;;
start-node) lock; cmd_start_node "${2:-}" ;;
stop-node) lock; cmd_stop_node "${2:-}" ;;
reset) lock; cmd_reset ;;
*) sed -n '/^# usage:/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
