#!/usr/bin/env bash
# Installs what the interop tests run (integration/interop): Node.js with
# npm and the locked npm packages (rascal, amqplib: testdata/node's
# package-lock.json, installed with npm ci), and Debian's python3-pika for
# /usr/bin/python3. Installs nothing that is already there; run as root
# (apt-get) when something is missing. The Go tests call it once per run
# and package; concurrent runs wait for each other (flock).
set -euo pipefail
cd "$(dirname "$0")"

# Two test packages (integration, integration/interop) run this at once on
# a fresh clone: one at a time, or their npm ci runs remove each other's
# node_modules (ENOTEMPTY) and their apt-get runs race for dpkg's lock.
exec 9>"${TMPDIR:-/tmp}/dlqbot-interop-setup.lock"
flock 9

log() { echo "interop setup: $*" >&2; }
apt_updated=
apt_install() {
  if [ "$(id -u)" != 0 ]; then log "need root to apt-get install $*"; exit 1; fi
  if [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  log "installing nodejs and npm"
  apt_install nodejs npm
fi
if ! /usr/bin/python3 -c 'import pika' 2>/dev/null; then
  log "installing python3-pika"
  apt_install python3 python3-pika
fi

# npm ci only when the lock changed since the last install here.
cd testdata/node
stamp=node_modules/.dlqbot-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "npm ci (rascal, amqplib)"
  npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2
  echo "$want" >"$stamp"
fi
