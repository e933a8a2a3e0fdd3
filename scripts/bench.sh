#!/usr/bin/env bash
# Runs every benchmark against its reference in the same run and writes the
# figures, with the command that produced them, to docs/benchmarks.md.
# Usage: scripts/bench.sh [messages-for-scan-benchmarks]
set -euo pipefail
cd "$(dirname "$0")/.."
export DLQBOT_BENCH_MESSAGES=${1:-100000}
out=docs/benchmarks.md
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

run() { # run <package> <regexp>
  local cmd="go test $1 -run '^\$' -bench '$2' -benchtime 1x -count 1 -timeout 60m"
  echo "+ $cmd" >&2
  echo "### \`$cmd\`" >>"$raw"
  echo '```' >>"$raw"
  eval "$cmd" 2>&1 | grep -E '^(Benchmark|goos|goarch|cpu|ok|FAIL|---)' | tee -a "$raw" >&2
  echo '```' >>"$raw"
}

run ./engine/amqp 'BenchmarkScan'
run ./engine/amqp 'BenchmarkMove'
run ./engine 'BenchmarkPacing|BenchmarkStopLatency'
run ./cmd/dlqbot 'BenchmarkInterruptReport'
if ls bot/*_test.go integration/*_test.go >/dev/null 2>&1 && grep -qs 'func BenchmarkAck' bot/*_test.go integration/*_test.go; then
  run ./integration 'BenchmarkAck'
fi

{
  echo "# Benchmarks"
  echo
  echo "Written by \`make bench\` (\`scripts/bench.sh\`) on $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores,"
  echo "RabbitMQ $(rabbitmqctl version 2>/dev/null | tail -1 || echo '?'), Redis $(redis-server --version | grep -o 'v=[0-9.]*' | cut -c3-)."
  echo "DLQBOT_BENCH_MESSAGES=$DLQBOT_BENCH_MESSAGES. This machine is shared and noisy: compare each figure with its"
  echo "reference from the same run (the ratios), not across runs."
  echo
  echo "## Raw output, one block per command"
  echo
  cat "$raw"
} >"$out"
echo "wrote $out" >&2
