#!/usr/bin/env bash
# services.sh owns the local services dlqbot's demo and tests need, on this
# kind of machine (Debian, root):
#   - Redis on 127.0.0.1:6379 (maxmemory-policy noeviction);
#   - RabbitMQ 3.10 (Debian bookworm's package) on 127.0.0.1:5672, management
#     on :15672;
#   - with "all" (the test suite asks for it; "rabbit4", its old name, too):
#     RabbitMQ 4.0 (Debian trixie's package) in a chroot under
#     DLQBOT_RABBIT4_ROOT (/var/lib/dlqbot/rabbit4), AMQP on 127.0.0.1:5673,
#     management on :15673, node rabbit4@localhost (epmd 4370, dist 25673);
#     and RabbitMQ 4.3 (Debian sid's package) in a chroot under
#     DLQBOT_RABBIT43_ROOT (/var/lib/dlqbot/rabbit43), AMQP on 127.0.0.1:5674,
#     management on :15674, node rabbit43@localhost (epmd 4371, dist 25674);
#   - with "rabbit43": that 4.3 broker only (beside Redis and 3.10).
# It installs from Debian's packages what is missing, starts what is not
# answering, enables the management plugin, and waits until each answers.
# On a machine where everything already runs it changes nothing. It says what
# it did on stderr.
#
# DLQBOT_SERVICES_BUILD_ONLY=1 builds missing chroots without starting
# them (to check the from-scratch build beside running brokers).
#
# usage: scripts/services.sh [all|rabbit43]
set -euo pipefail

want4= want43=
case "${1:-}" in
  "") ;;
  all | rabbit4) want4=1 want43=1 ;; # rabbit4: its name before 4.3 joined
  rabbit43) want43=1 ;;
  *) echo "usage: scripts/services.sh [all|rabbit43]" >&2; exit 2 ;;
esac
ROOT4=${DLQBOT_RABBIT4_ROOT:-/var/lib/dlqbot/rabbit4}
ROOT43=${DLQBOT_RABBIT43_ROOT:-/var/lib/dlqbot/rabbit43}

did=()
log() { echo "services: $*" >&2; }
apt_updated=
apt_install() {
  if [ -z "$apt_updated" ]; then apt-get -o DPkg::Lock::Timeout=600 update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
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

# chroot_rabbit <label> <root> <suite> <amqp> <mgmt> <node> <dist> <epmd>
# builds (once) a Debian <suite> chroot at <root> with that suite's
# rabbitmq-server, configured for the given ports, and starts it there as
# the rabbitmq user unless its AMQP port answers already. It builds into
# <root>.tmp and moves it into place only when complete, so a failed build
# leaves nothing half-made behind. With DLQBOT_SERVICES_BUILD_ONLY=1 it only
# builds (a check that the from-scratch path works, without starting a
# second broker on the same ports).
chroot_rabbit() {
  local label=$1 root=$2 suite=$3 amqp=$4 mgmt=$5 node=$6 dist=$7 epmd=$8
  if [ ! -x "$root/usr/sbin/rabbitmq-server" ]; then
    command -v debootstrap >/dev/null || apt_install debootstrap
    log "building a Debian $suite chroot for RabbitMQ $label in $root (a few minutes, once)"
    mkdir -p "$(dirname "$root")"
    # A mirror's download can fail once ("Retrying failed download", then
    # a failed validation): build again from scratch, up to three times.
    local try
    for try in 1 2 3; do
      rm -rf "$root.tmp"
      debootstrap --variant=minbase "$suite" "$root.tmp" http://deb.debian.org/debian >"$root.log" 2>&1 && break
      if [ "$try" = 3 ]; then
        tail -20 "$root.log" >&2; log "debootstrap failed three times (log: $root.log)"; exit 1
      fi
      log "debootstrap of $suite failed (try $try of 3); building again"
    done
    # Erlang's epmd resolves localhost through /etc/hosts.
    cp /etc/hosts "$root.tmp/etc/hosts"
    mount -t proc proc "$root.tmp/proc"
    trap 'umount "'"$root"'.tmp/proc" 2>/dev/null || true' EXIT
    # sid's Release file can be past its Valid-Until on the day a mirror
    # serves it: do not let that stop the build.
    if ! chroot "$root.tmp" sh -c 'apt-get -o Acquire::Check-Valid-Until=false update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rabbitmq-server' >>"$root.log" 2>&1; then
      tail -20 "$root.log" >&2; log "installing rabbitmq-server in the chroot failed (log: $root.log)"; exit 1
    fi
    mkdir -p "$root.tmp/etc/rabbitmq"
    cat >"$root.tmp/etc/rabbitmq/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$amqp
management.tcp.port = $mgmt
management.tcp.ip = 127.0.0.1
loopback_users = none
CONF
    cat >"$root.tmp/etc/rabbitmq/rabbitmq-env.conf" <<CONF
NODENAME=$node
DIST_PORT=$dist
ERL_EPMD_PORT=$epmd
CONF
    echo '[rabbitmq_management,rabbitmq_shovel,rabbitmq_shovel_management].' >"$root.tmp/etc/rabbitmq/enabled_plugins"
    umount "$root.tmp/proc"; trap - EXIT
    mv "$root.tmp" "$root"
    did+=("built RabbitMQ $label chroot $root ($(chroot "$root" dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || echo 'version unknown'))")
  fi
  [ "${DLQBOT_SERVICES_BUILD_ONLY:-}" = 1 ] && return 0
  if ! port_open "$amqp"; then
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
    chroot "$root" su -s /bin/sh rabbitmq -c "cd /var/lib/rabbitmq && ERL_EPMD_PORT=$epmd HOME=/var/lib/rabbitmq rabbitmq-server -detached" >/dev/null
    did+=("started rabbitmq $label on :$amqp")
  fi
  wait_for "rabbitmq $label amqp" 180 port_open "$amqp"
  wait_for "rabbitmq $label management" 180 curl -sf -u guest:guest "http://127.0.0.1:$mgmt/api/overview"
}

# RabbitMQ 4.0 beside it, in a Debian trixie chroot.
if [ -n "$want4" ]; then
  chroot_rabbit 4.0 "$ROOT4" trixie 5673 15673 rabbit4@localhost 25673 4370
fi

# RabbitMQ 4.3 beside them, in a Debian sid chroot (sid's package is 4.3.x).
if [ -n "$want43" ]; then
  chroot_rabbit 4.3 "$ROOT43" sid 5674 15674 rabbit43@localhost 25674 4371
fi

if [ ${#did[@]} -eq 0 ]; then
  log "all running already; changed nothing"
else
  for d in "${did[@]}"; do log "$d"; done
fi
