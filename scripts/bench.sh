#!/usr/bin/env bash
# Runs dlqbot's binary as a user does (bench.BenchmarkBinary: `dlqbot
# preview … --json`, then `dlqbot replay <token> rate=max --json`, in the
# operator's direct mode with the binary's own defaults), each run beside
# its reference in the same run, on a DLQ fed through the default exchange
# and on one bound to a dead-letter exchange, and writes the figures to
# docs/benchmarks.md: one table of current figures, then the raw output,
# then the earlier runs (the previous current figures move there).
# Usage: scripts/bench.sh [messages]   (default 20,000; 100,000 and
# 1,000,000 by hand, on a quiet machine). BENCH_NOTE is added under the
# table (e.g. "taken on a busy, shared machine").
set -euo pipefail
cd "$(dirname "$0")/.."
export DLQBOT_BENCH_BINARY_MESSAGES=${1:-20000}
out=docs/benchmarks.md
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

go build -o bin/dlqbot ./cmd/dlqbot
export DLQBOT_BENCH_BIN=$PWD/bin/dlqbot
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
cmd="DLQBOT_BENCH_BINARY_MESSAGES=$DLQBOT_BENCH_BINARY_MESSAGES go test ./bench -run '^\$' -bench BenchmarkBinary -benchtime 1x -count 1 -timeout 120m -v"
echo "+ $cmd" >&2
eval "$cmd" 2>&1 | grep -E '^(Benchmark|goos|goarch|cpu|ok|FAIL|---|PASS)|returns found by' | tee "$raw" >&2
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

BENCH_CMD="$cmd" BENCH_WHEN="$(date -u +%Y-%m-%dT%H:%MZ)" BENCH_CORES="$(nproc)" \
BENCH_RABBIT="$(rabbitmqctl version 2>/dev/null | tail -1 || echo '?')" \
BENCH_REDIS="$(redis-server --version | grep -o 'v=[0-9.]*' | cut -c3-)" \
BENCH_LOAD="$load_before before, $load_after after" BENCH_NOTE="${BENCH_NOTE:-}" \
python3 - "$raw" "$out" <<'PY'
import os, re, sys
raw_path, out_path = sys.argv[1], sys.argv[2]
raw = open(raw_path).read()
m = {}
for line in raw.splitlines():
    if not line.startswith("Benchmark"):
        continue
    f = line.split()
    name = re.sub(r"-\d+$", "", f[0])
    m[name] = {f[i + 1]: float(f[i]) for i in range(2, len(f) - 1, 2) if re.match(r"^-?[\d.e+]+$", f[i])}
n = int(os.environ["DLQBOT_BENCH_BINARY_MESSAGES"])
def g(b, k, fmt="{:,.0f}"):
    v = m.get(b, {}).get(k)
    return "–" if v is None else fmt.format(v)
def reads(b):
    p, r = m.get(b, {}).get("preview-deliveries"), m.get(b, {}).get("replay-deliveries")
    if p is None or r is None:
        return "deliveries not counted"
    return f"{p + r:,.0f} deliveries from the DLQ, preview included ({(p + r) / n:.2f}× its size: preview {p:,.0f}, replay {r:,.0f})"
setups = [("default-exchange", 'default exchange (`x-dead-letter-exchange: ""`)'), ("dlx", "bound to a DLX")]
rows = []
for s, label in setups:
    w, f = "BenchmarkBinary/whole/" + s, "BenchmarkBinary/filtered/" + s
    rows.append((f"Whole replay, {n:,} × 1 KB, one unpaced step (`step={n} cap={n}`), approve → finished", label,
        f"{g(w,'dlqbot-msgs/s')} msg/s ({g(w,'replay-s','{:.1f}')} s for `replay`); {reads(w)}",
        f"confirm-then-ack mover {g(w,'mover-msgs/s')} msg/s; shovel {g(w,'shovel-msgs/s')} msg/s",
        f"{g(w,'ratio-dlqbot/mover','{:.2f}×')} the mover, {g(w,'ratio-dlqbot/shovel','{:.2f}×')} the shovel",
        f"each a fresh DLQ of {n:,}, filled right before it ran; dlqbot's read once by its own preview, the mover's and the shovel's by nobody; all three empty after"))
    rows.append((f"Filtered replay of 10% (`source=<work>`, every tenth), {n:,} × 1 KB, default steps", label,
        f"{g(f,'replay-s','{:.1f}')} s for `replay` in {g(f,'steps')} steps (+ {g(f,'preview-s','{:.1f}')} s preview); {reads(f)}; returns found by " + ("the replay's cursor at the DLQ's tail (no tap)" if m.get(f,{}).get('reread') == 1 else "the tap"),
        f"one-pass filtered mover {g(f,'mover-s','{:.1f}')} s, {g(f,'mover-deliveries')} deliveries",
        f"{g(f,'time-ratio-dlqbot/mover','{:.2f}×')} the mover's time ({g(f,'time-ratio-preview+replay/mover','{:.2f}×')} with the preview)",
        f"each a fresh DLQ of {n:,} ({n//10:,} selected), dlqbot's read first by its preview; {n - n//10:,} left in each after"))
    rows.append((f"Peak RSS of the binary (VmHWM), {n:,}", label,
        f"preview {g(w,'preview-peak-RSS-MB','{:.1f}')} MB, whole replay {g(w,'replay-peak-RSS-MB','{:.1f}')} MB; filtered: preview {g(f,'preview-peak-RSS-MB','{:.1f}')} MB, replay {g(f,'replay-peak-RSS-MB','{:.1f}')} MB",
        "–", "target ≤ 300 MB at 1,000,000", "as above"))
cmd = os.environ["BENCH_CMD"]
lines = []
lines.append("# Benchmarks")
lines.append("")
lines.append("## Current figures")
lines.append("")
lines.append(f"Written by `make bench` (`scripts/bench.sh`) on {os.environ['BENCH_WHEN']}, {os.environ['BENCH_CORES']} cores, "
             f"RabbitMQ {os.environ['BENCH_RABBIT']} (classic DLQs), Redis {os.environ['BENCH_REDIS']}; load average {os.environ['BENCH_LOAD']}. "
             "Every figure comes from the one command below, which runs the built binary as a user does "
             "(`bin/dlqbot preview <dlq> [source=…] --json`, then `bin/dlqbot replay <token> rate=max --json`, "
             "operator direct mode with `DLQBOT_ACCESS=open`, the binary's own defaults: no GOMEMLIMIT, no GOGC), "
             "each beside its reference in the same run; compare the ratios, never figures across runs. "
             "A healthy auto-ack consumer reads each work queue.")
if os.environ.get("BENCH_NOTE"):
    lines.append("")
    lines.append("**" + os.environ["BENCH_NOTE"] + "**")
lines.append("")
lines.append(f"Command: `{cmd}`")
lines.append("")
lines.append("| measure | DLQ fed through | dlqbot (through the binary) | reference (same run) | ratio | DLQ state, both sides |")
lines.append("| --- | --- | --- | --- | --- | --- |")
for r in rows:
    lines.append("| " + " | ".join(r) + " |")
lines.append("")
lines.append("Time for dlqbot is the `replay` command's wall time (approve → finished, the process's start and exit included); "
             "for the mover, from its first read to its last ack; for the shovel, from its creation until it has deleted itself "
             "and its DLQ holds nothing. Each contender's consumer must receive every copy and each DLQ must hold what it should, "
             "or the run fails. Deliveries from dlqbot's DLQ are what each process received from it, counted where they arrived "
             "(amqp.Broker.Delivered) and logged when it exits (`--verbose`); the approval of a DLQ of fewer than 100,000 "
             "compares it with the preview by reading it, and on a classic DLQ its run's cursor begins from that read (no read more: "
             "docs/design.md \"The compare's read, kept for the run\"); from 100,000 the management statistics prove it unchanged (no read). "
             "The engine tests TestDefaultExchangeReplayReadsEachMessageAtMostTwice and TestTheRunSendsFromItsApprovalsRead "
             "count the same on 3.10, 4.0 and 4.3.")
lines.append("")
lines.append("### Raw output")
lines.append("")
lines.append("```")
lines.append(raw.rstrip())
lines.append("```")
current = "\n".join(lines[2:])  # without the title

# The previous file: its current figures move to the top of the earlier runs.
marker = "<!-- earlier runs below: kept by scripts/bench.sh -->"
old = open(out_path).read() if os.path.exists(out_path) else ""
def demote(text):
    out, fence = [], False
    for l in text.splitlines():
        if l.startswith("```"):
            fence = not fence
        out.append("#" + l if (not fence and l.startswith("#")) else l)
    return "\n".join(out)
# The figures measured by hand (100,000 and 1,000,000) stay where they
# are, after the current ones, until someone edits them.
hand_marker = "<!-- figures by hand: kept by scripts/bench.sh -->"
hand = ""
if hand_marker in old:
    hand = hand_marker + old.split(hand_marker, 1)[1].split("## Earlier runs", 1)[0].rstrip("\n")
    old = old.split(hand_marker, 1)[0] + "## Earlier runs" + old.split(hand_marker, 1)[1].split("## Earlier runs", 1)[1]
if marker in old:
    head, earlier = old.split(marker, 1)
    prev = head.split("## Current figures", 1)[1].split("## Earlier runs", 1)[0] if "## Current figures" in head else ""
    m_when = re.search(r"on (\d{4}-\d\d-\d\dT\d\d:\d\dZ)", prev)
    title = "### `make bench` of " + (m_when.group(1) if m_when else "an earlier run")
    earlier = "\n" + title + "\n" + demote(prev.strip("\n")) + "\n" + earlier if prev.strip() else earlier
else:
    earlier = "\n### Before `make bench` ran the binary\n\n" + demote(old.replace("# Benchmarks\n", "", 1).strip("\n"))
with open(out_path, "w") as fh:
    fh.write("# Benchmarks\n\n" + current + "\n\n" + (hand + "\n\n" if hand else "") + "## Earlier runs\n\nOlder figures, each with its date, machine and command; "
             "engine benchmarks (`go test ./engine -bench …`) measured the engine in process, not the binary.\n\n" + marker + "\n" + earlier.lstrip("\n"))
PY
echo "wrote $out" >&2
