#!/usr/bin/env bash
# Makes a Compose command available to check compose.yaml with
# `docker-compose config` / `docker compose config` (deploy/compose_test.go
# runs this in CI, where CI=true). It needs no Docker engine and installs
# none: only Debian's docker-compose, without its recommended docker.io.
# It changes nothing when a Compose command is already there.
set -euo pipefail

if docker compose version >/dev/null 2>&1; then
  echo "install-compose: docker compose is available" >&2
  exit 0
fi
if command -v docker-compose >/dev/null; then
  echo "install-compose: docker-compose is available" >&2
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "install-compose: no Compose command; install Debian's docker-compose (apt-get install --no-install-recommends docker-compose) or Docker's compose plugin" >&2
  exit 1
fi
echo "install-compose: installing Debian's docker-compose" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
docker-compose version >&2
