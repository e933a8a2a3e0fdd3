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
    /usr/lib/rabbitmq/bin/$*"
}

prepare() {
  if [ ! -x "$ROOT/usr/sbin/rabbitmq-server" ]; then
    log "no RabbitMQ 4.3 chroot in $ROOT: running scripts/services.sh to build it"
    scripts/services.sh rabbit43 >&2 || die "scripts/services.sh could not build $ROOT"
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

running() { in_node "$1" rabbitmqctl -q -t 5 ping >/dev/null 2>&1; }

wait_up() { # wait_up NODE: until its AMQP and management ports answer
  local n=$1 i
  for ((i = 0; i < 180; i++)); do
    if port_open "$(amqp_port "$n")" && curl -sf -u guest:guest "http://127.0.0.1:$(mgmt_port "$n")/api/overview" >/dev/null 2>&1; then
      return 0
    fi
    sleep 1
  done
  die "$n did not answer on :$(amqp_port "$n") / :$(mgmt_port "$n") within 180 s (log: $DIR/$n/log)"
}

start_node() { # start_node NODE: start it when it is down; true when it was started
  local n=$1
  if running "$n"; then return 1; fi
  in_node "$n" rabbitmq-server -detached ">/cluster/$n/log/startup_log" "2>&1"
  wait_up "$n"
  return 0
}

members() { # members NODE: the running nodes the cluster reports, one a line
  curl -sf -u guest:guest "http://127.0.0.1:$(mgmt_port "$1")/api/nodes?columns=name,running" |
    tr '}' '\n' | sed -nE 's/.*"name":"([^"]+)","running":true.*/\1/p'
}

joined() { # joined NODE: NODE is a disc member of dlqc1's cluster
  in_node dlqc1 rabbitmqctl -q -t 10 cluster_status --formatter json 2>/dev/null |
    grep -q "\"$1@localhost\""
}

join() { # join NODE: make NODE a member of dlqc1's cluster
  local n=$1
  in_node "$n" rabbitmqctl -q stop_app >/dev/null
  in_node "$n" rabbitmqctl -q reset >/dev/null
  in_node "$n" rabbitmqctl -q join_cluster dlqc1@localhost >/dev/null
  in_node "$n" rabbitmqctl -q start_app >/dev/null
  wait_up "$n"
}

cmd_start() {
  prepare
  local did=() n
  for n in "${NODES[@]}"; do
    if start_node "$n"; then did+=("started $n on :$(amqp_port "$n") (management :$(mgmt_port "$n"))"); fi
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

cmd_stop() {
  mountpoint -q "$ROOT/cluster" 2>/dev/null || { log "not set up; nothing to stop"; return; }
  local n any=0
  for n in "${NODES[@]}"; do
    if running "$n"; then
      in_node "$n" rabbitmqctl -q stop >/dev/null 2>&1 || true
      log "stopped $n"; any=1
    fi
  done
  [ $any -eq 1 ] || log "no node was running; changed nothing"
}

cmd_status() {
  mountpoint -q "$ROOT/cluster" 2>/dev/null || { log "not set up (scripts/cluster.sh start)"; exit 1; }
  local n up=0
  for n in "${NODES[@]}"; do
    if running "$n"; then
      echo "$n@localhost up: amqp://guest:guest@127.0.0.1:$(amqp_port "$n")/ http://guest:guest@127.0.0.1:$(mgmt_port "$n")"
      up=$n
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
  pid=$(cat "$DIR/$n/pid" 2>/dev/null || true)
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
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
  if start_node "$n"; then log "started $n"; else log "$n runs already; changed nothing"; fi
}

cmd_stop_node() {
  local n=${1:?usage: scripts/cluster.sh stop-node NODE}
  index "$n" >/dev/null
  if running "$n"; then
    in_node "$n" rabbitmqctl -q stop >/dev/null
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
case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
kill) cmd_kill "${2:-}" ;;
start-node) cmd_start_node "${2:-}" ;;
stop-node) cmd_stop_node "${2:-}" ;;
reset) cmd_reset ;;
*) sed -n '/^# usage:/,/^# Needs/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
