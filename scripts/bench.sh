#!/usr/bin/env bash
# Runs every benchmark against its reference in the same run and writes the
# figures, with the command that produced them, to docs/benchmarks.md.
# Usage: scripts/bench.sh [messages-for-scan-benchmarks]
set -euo pipefail
cd "$(dirname "$0")/.."
export DLQBOT_BENCH_MESSAGES=${1:-100000}
export DLQBOT_BENCH_REPLAY_MESSAGES=${DLQBOT_BENCH_REPLAY_MESSAGES:-$DLQBOT_BENCH_MESSAGES}
export DLQBOT_BENCH_ROUNDS=${DLQBOT_BENCH_ROUNDS:-5}
out=docs/benchmarks.md
raw=$(mktemp)
lines=$(mktemp)
trap 'rm -f "$raw" "$lines"' EXIT

run() { # run <package> <regexp> <benchtime>
  local cmd="go test $1 -run '^\$' -bench '$2' -benchtime $3 -count 1 -timeout 60m"
  echo "+ $cmd" >&2
  { echo "### \`$cmd\`"; echo '```'; } >>"$raw"
  eval "$cmd" 2>&1 | grep -E '^(Benchmark|goos|goarch|cpu|ok|FAIL|---)' | tee -a "$raw" "$lines" >&2
  echo '```' >>"$raw"
}

run ./engine/amqp 'BenchmarkScan' 1x
run ./engine 'BenchmarkPreview' 1x
run ./engine/amqp 'BenchmarkMove' 1x
run ./engine 'BenchmarkPacing|BenchmarkStopLatency' 1x
run ./cmd/dlqbot 'BenchmarkInterruptReport' 1x
run ./integration 'BenchmarkSlashCommandAck' 500x
run ./engine 'BenchmarkReturnsLookup' 1x
run ./engine 'BenchmarkWholeReplay' 1x
run ./store 'BenchmarkTokenFormats|BenchmarkTokenLoadHeader' 1x
run ./engine 'BenchmarkPreviewApproveStep' 1x
run ./engine 'BenchmarkFilteredReplay' 1x

summary=$(python3 - "$lines" <<'PY'
import re, sys
m = {}
for line in open(sys.argv[1]):
    if not line.startswith("Benchmark"):
        continue
    f = line.split()
    name = re.sub(r"-\d+$", "", f[0])
    vals = {f[i + 1]: float(f[i]) for i in range(2, len(f) - 1, 2) if re.match(r"^-?[\d.e+]+$", f[i])}
    m[name] = vals
def g(b, k, fmt="{:,.0f}"):
    v = m.get(b, {}).get(k)
    return "–" if v is None else fmt.format(v)
rows = [
  ("Preview scan, classic DLQ, 100k × 1 KB", "≥ 50% of a minimal reader", f"{g('BenchmarkScan/classic','msgs/s')} msg/s vs {g('BenchmarkScan/classic','ref-msgs/s')} msg/s", g('BenchmarkScan/classic','ratio','{:.2f}×')),
  ("Preview scan, quorum DLQ, 100k × 1 KB", "≥ 50% of a minimal reader", f"{g('BenchmarkScan/quorum','msgs/s')} msg/s vs {g('BenchmarkScan/quorum','ref-msgs/s')} msg/s", g('BenchmarkScan/quorum','ratio','{:.2f}×')),
  ("Preview scan peak Go heap (classic / quorum)", "< 150 MB", f"{g('BenchmarkScan/classic','peak-MB','{:.1f}')} / {g('BenchmarkScan/quorum','peak-MB','{:.1f}')} MB", "reference " + g('BenchmarkScan/classic','ref-peak-MB','{:.1f}') + " / " + g('BenchmarkScan/quorum','ref-peak-MB','{:.1f}') + " MB"),
  ("Whole preview (scan, fingerprints, token), classic DLQ, DLQBOT_BENCH_MESSAGES × 1 KB", "peak RSS ≤ 300 MB at 1M; reads all", f"{g('BenchmarkPreview','msgs/s')} msg/s, peak RSS {g('BenchmarkPreview','peak-RSS-MB')} MB, peak heap {g('BenchmarkPreview','peak-heap-MB')} MB, read {g('BenchmarkPreview','read')}", "compare with the scan's reference reader above"),
  ("Unpaced replay send path, 10k × 1 KB persistent", "≥ 80% of a minimal confirm-then-ack mover", f"{g('BenchmarkMove','dlqbot-msgs/s')} msg/s vs {g('BenchmarkMove','minimal-mover-msgs/s')} msg/s (shovel {g('BenchmarkMove','shovel-msgs/s')}, get/publish/ack loop {g('BenchmarkMove','get-publish-ack-loop-msgs/s')})", g('BenchmarkMove','ratio-dlqbot/minimal','{:.2f}×') + " (median of per-round ratios)"),
  ("… against the same mover writing the three replay headers", "(like for like)", f"{g('BenchmarkMove','dlqbot-msgs/s')} msg/s vs {g('BenchmarkMove','minimal-mover+replay-headers-msgs/s')} msg/s", g('BenchmarkMove','ratio-dlqbot/minimal+headers','{:.2f}×')),
  ("Whole replay in one unpaced step, classic DLQ, DLQBOT_BENCH_REPLAY_MESSAGES × 1 KB, exact", "against a minimal confirm-then-ack mover and the shovel, same messages", f"{g('BenchmarkWholeReplay','dlqbot-msgs/s')} msg/s (approval {g('BenchmarkWholeReplay','approve-s','{:.1f}')} s more) vs minimal {g('BenchmarkWholeReplay','minimal-mover-msgs/s')}, with headers {g('BenchmarkWholeReplay','minimal-mover+replay-headers-msgs/s')}, shovel {g('BenchmarkWholeReplay','shovel-msgs/s')} msg/s", g('BenchmarkWholeReplay','ratio-dlqbot/minimal','{:.2f}×') + " / " + g('BenchmarkWholeReplay','ratio-dlqbot/minimal+headers','{:.2f}×') + " / " + g('BenchmarkWholeReplay','ratio-dlqbot/shovel','{:.2f}×')),
  ("Preview of the same DLQ, before that replay", "peak RSS ≤ 300 MB at 1M; against the minimal reader", f"{g('BenchmarkWholeReplay','preview-msgs/s')} msg/s, read {g('BenchmarkWholeReplay','preview-read')}, peak RSS {g('BenchmarkWholeReplay','preview-peak-RSS-MB')} MB vs {g('BenchmarkWholeReplay','ref-read-msgs/s')} msg/s", ""),
  ("Preview token of 1,000,000 items: size, decode CPU (binary vs JSON/gzip)", "compact, streamed", f"{g('BenchmarkTokenFormats/1000000','binary-MB','{:.1f}')} MB, {g('BenchmarkTokenFormats/1000000','binary-dec-cpu-ms')} ms, {g('BenchmarkTokenFormats/1000000','binary-dec-alloc-MB')} MB allocated vs {g('BenchmarkTokenFormats/1000000','json-gzip-MB','{:.1f}')} MB, {g('BenchmarkTokenFormats/1000000','json-gzip-dec-cpu-ms')} ms, {g('BenchmarkTokenFormats/1000000','json-gzip-dec-alloc-MB')} MB", "header alone " + g('BenchmarkTokenLoadHeader','load-header-ms','{:.2f}') + " ms vs whole " + g('BenchmarkTokenLoadHeader','load-ms') + " ms"),
  ("Preview, approval, one unpaced step, DLQBOT_BENCH_REPLAY_MESSAGES × 1 KB", "peak RSS ≤ 300 MB at 1M", f"{g('BenchmarkPreviewApproveStep','preview-s','{:.1f}')} s + {g('BenchmarkPreviewApproveStep','approve-s','{:.1f}')} s + {g('BenchmarkPreviewApproveStep','step-s','{:.1f}')} s; peak RSS {g('BenchmarkPreviewApproveStep','preview-peak-RSS-MB')} / {g('BenchmarkPreviewApproveStep','approve+step-peak-RSS-MB')} MB", "preview / approval and step"),
  ("Filtered replay of a tenth of DLQBOT_BENCH_MESSAGES × 1 KB, default steps, unpaced, exact", "deliveries ≤ 2× the DLQ; time ≤ 1.5× a one-pass filtered mover, same run", f"{g('BenchmarkFilteredReplay','dlqbot-s','{:.1f}')} s, {g('BenchmarkFilteredReplay','dlqbot-deliveries')} deliveries in {g('BenchmarkFilteredReplay','steps')} steps (preview {g('BenchmarkFilteredReplay','preview-deliveries')}, approval {g('BenchmarkFilteredReplay','approve-deliveries')} apart) vs mover {g('BenchmarkFilteredReplay','mover-s','{:.1f}')} s, {g('BenchmarkFilteredReplay','mover-deliveries')} deliveries", g('BenchmarkFilteredReplay','time-ratio-dlqbot/mover','{:.2f}×') + " time, " + g('BenchmarkFilteredReplay','deliveries/DLQ','{:.2f}×') + " the DLQ read"),
  ("Pacing, rate=100 over 30 s", "within 5%", f"{g('BenchmarkPacing','achieved-msgs/s','{:.2f}')} msg/s", g('BenchmarkPacing','error-%','{:+.3f}%')),
  ("Pause click → last copy delivered (rate=200)", "≤ 1 s", f"mean {g('BenchmarkStopLatency/pause','mean-ms')} ms, worst {g('BenchmarkStopLatency/pause','worst-ms')} ms", ""),
  ("Cancel click → last copy delivered (rate=200)", "≤ 1 s", f"mean {g('BenchmarkStopLatency/cancel','mean-ms')} ms, worst {g('BenchmarkStopLatency/cancel','worst-ms')} ms", ""),
  ("Owner SIGKILLed → interrupted reported (15 s lease)", "≤ 30 s", f"{g('BenchmarkInterruptReport','s-to-interrupted','{:.1f}')} s", ""),
  ("Slash-command ack while previewing a 100k DLQ", "< 3 s", f"p99 {g('BenchmarkSlashCommandAckWhilePreviewing','p99-ms','{:.1f}')} ms (p50 {g('BenchmarkSlashCommandAckWhilePreviewing','p50-ms','{:.2f}')} ms)", ""),
]
print("| measure | target | measured (same run) | ratio / note |")
print("| --- | --- | --- | --- |")
for r in rows:
    print("| " + " | ".join(r) + " |")
PY
)

# Hand-run sections (larger sizes, runs on a quiet machine) follow the marker
# line and are kept as they are.
marker='<!-- hand-run sections below: kept by scripts/bench.sh -->'
kept=$(mktemp)
if grep -qxF "$marker" "$out" 2>/dev/null; then awk -v m="$marker" 'f || $0 == m { f = 1; print }' "$out" >"$kept"; else echo "$marker" >"$kept"; fi
{
  echo "# Benchmarks"
  echo
  echo "Written by \`make bench\` (\`scripts/bench.sh\`) on $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores,"
  echo "RabbitMQ $(rabbitmqctl version 2>/dev/null | tail -1 || echo '?'), Redis $(redis-server --version | grep -o 'v=[0-9.]*' | cut -c3-)."
  echo "DLQBOT_BENCH_MESSAGES=$DLQBOT_BENCH_MESSAGES, DLQBOT_BENCH_REPLAY_MESSAGES=$DLQBOT_BENCH_REPLAY_MESSAGES, DLQBOT_BENCH_ROUNDS=$DLQBOT_BENCH_ROUNDS. This machine is shared and noisy:"
  echo "each figure is compared with its reference measured in the same run (the ratios), never across runs."
  echo
  echo "## Summary"
  echo
  echo "$summary"
  echo
  echo "The replay send path includes everything a replay does per message: the"
  echo "fingerprint, the header rewrite, the ledger's intent and confirm records in Redis,"
  echo "confirm-then-ack. The reference mover does only confirm-then-ack, with the same"
  echo "in-flight window (500), copying each message unchanged; it is also run writing the"
  echo "three headers a replay must add (x-replay-id, x-replay-count, stroma.dlq.replayed_from),"
  echo "because headers on a copy cost the broker and client measurably (about 20% here),"
  echo "whoever writes them. The contenders run interleaved over the rounds, in rotated"
  echo "order, and medians are reported."
  echo
  echo "## Raw output, one block per command"
  echo
  cat "$raw"
  echo
  cat "$kept"
} >"$out"
rm -f "$kept"
echo "wrote $out" >&2
