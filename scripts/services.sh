#!/usr/bin/env bash
# services.sh owns the local services dlqbot's demo and tests need, on this
# kind of machine (Debian, root):
#   - Redis on 127.0.0.1:6379 (maxmemory-policy noeviction);
#   - RabbitMQ 3.10 (Debian bookworm's package) on 127.0.0.1:5672, management
#     on :15672;
#   - with "rabbit4" (the test suite asks for it): RabbitMQ 4.0 (Debian
#     trixie's package) in a chroot under DLQBOT_RABBIT4_ROOT, AMQP on
#     127.0.0.1:5673, management on :15673.
# It installs from Debian's packages what is missing, starts what is not
# answering, enables the management plugin, and waits until each answers.
# On a machine where everything already runs it changes nothing. It says what
# it did on stderr.
#
# usage: scripts/services.sh [rabbit4]
set -euo pipefail

want4=
[ "${1:-}" = rabbit4 ] && want4=1
ROOT4=${DLQBOT_RABBIT4_ROOT:-/var/lib/dlqbot/rabbit4}

did=()
log() { echo "services: $*" >&2; }
apt_updated=
apt_install() {
  if [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  did+=("installed $*")
}
wait_for() { # wait_for <what> <seconds> <command…>
  local what=$1 secs=$2; shift 2
  for _ in $(seq 1 "$secs"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  log "$what did not come up within ${secs}s"; return 1
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if [ "$(id -u)" != 0 ] && ! { port_open 6379 && port_open 5672 && port_open 15672; }; then
  log "not root and the services are not all running: start Redis and RabbitMQ (with rabbitmq_management) yourself, or run this as root"
  exit 1
fi

command -v curl >/dev/null || apt_install curl ca-certificates

# Redis.
if ! command -v redis-server >/dev/null; then apt_install redis-server redis-tools; fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; then
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null
  did+=("started redis")
fi
wait_for redis 30 sh -c 'redis-cli -h 127.0.0.1 -p 6379 ping | grep -q PONG'
if [ "$(redis-cli -h 127.0.0.1 config get maxmemory-policy | tail -1)" != noeviction ]; then
  redis-cli -h 127.0.0.1 config set maxmemory-policy noeviction >/dev/null
  did+=("set redis maxmemory-policy noeviction")
fi

# RabbitMQ 3.10 with the management plugin.
plugins="rabbitmq_management rabbitmq_shovel rabbitmq_shovel_management"
if ! command -v rabbitmq-server >/dev/null; then apt_install rabbitmq-server; fi
if ! port_open 5672; then
  before=$(cat /etc/rabbitmq/enabled_plugins 2>/dev/null || true)
  rabbitmq-plugins enable --offline $plugins >/dev/null 2>&1 || true
  [ "$before" = "$(cat /etc/rabbitmq/enabled_plugins 2>/dev/null || true)" ] || did+=("enabled $plugins")
  rabbitmq-server -detached
  did+=("started rabbitmq")
fi
wait_for "rabbitmq amqp" 120 port_open 5672
if ! curl -sf -u guest:guest http://127.0.0.1:15672/api/overview >/dev/null 2>&1; then
  wait_for "rabbitmq node" 60 rabbitmqctl -q status
  rabbitmq-plugins enable $plugins >/dev/null
  did+=("enabled $plugins")
fi
wait_for "rabbitmq management" 120 curl -sf -u guest:guest http://127.0.0.1:15672/api/overview

# RabbitMQ 4.0 beside it, in a Debian trixie chroot.
if [ -n "$want4" ]; then
  if [ ! -x "$ROOT4/usr/sbin/rabbitmq-server" ]; then
    command -v debootstrap >/dev/null || apt_install debootstrap
    log "building a Debian trixie chroot for RabbitMQ 4 in $ROOT4 (a few minutes, once)"
    rm -rf "$ROOT4.tmp"; mkdir -p "$(dirname "$ROOT4")"
    if ! debootstrap --variant=minbase trixie "$ROOT4.tmp" http://deb.debian.org/debian >"$ROOT4.log" 2>&1; then
      tail -20 "$ROOT4.log" >&2; log "debootstrap failed (log: $ROOT4.log)"; exit 1
    fi
    mount -t proc proc "$ROOT4.tmp/proc"
    trap 'umount "$ROOT4.tmp/proc" 2>/dev/null || true' EXIT
    if ! chroot "$ROOT4.tmp" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rabbitmq-server' >"$ROOT4.log" 2>&1; then
      tail -20 "$ROOT4.log" >&2; log "installing rabbitmq-server in the chroot failed (log: $ROOT4.log)"; exit 1
    fi
    mkdir -p "$ROOT4.tmp/etc/rabbitmq"
    cat >"$ROOT4.tmp/etc/rabbitmq/rabbitmq.conf" <<'CONF'
listeners.tcp.default = 127.0.0.1:5673
management.tcp.port = 15673
management.tcp.ip = 127.0.0.1
loopback_users = none
CONF
    cat >"$ROOT4.tmp/etc/rabbitmq/rabbitmq-env.conf" <<'CONF'
NODENAME=rabbit4@localhost
DIST_PORT=25673
ERL_EPMD_PORT=4370
CONF
    echo '[rabbitmq_management,rabbitmq_shovel,rabbitmq_shovel_management].' >"$ROOT4.tmp/etc/rabbitmq/enabled_plugins"
    umount "$ROOT4.tmp/proc"; trap - EXIT
    mv "$ROOT4.tmp" "$ROOT4"
    did+=("built RabbitMQ 4 chroot $ROOT4")
  fi
  if ! port_open 5673; then
    mountpoint -q "$ROOT4/proc" || mount -t proc proc "$ROOT4/proc"
    chroot "$ROOT4" su -s /bin/sh rabbitmq -c 'cd /var/lib/rabbitmq && ERL_EPMD_PORT=4370 HOME=/var/lib/rabbitmq rabbitmq-server -detached' >/dev/null
    did+=("started rabbitmq 4 on :5673")
  fi
  wait_for "rabbitmq 4 amqp" 180 port_open 5673
  wait_for "rabbitmq 4 management" 180 curl -sf -u guest:guest http://127.0.0.1:15673/api/overview
fi

if [ ${#did[@]} -eq 0 ]; then
  log "all running already; changed nothing"
else
  for d in "${did[@]}"; do log "$d"; done
fi
