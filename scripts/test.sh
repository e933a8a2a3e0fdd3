#!/usr/bin/env bash
# make test's body: the suite in three lanes that run at the same time,
# each a go test of its own, since the tests spend most of their time
# waiting on the brokers (statistics intervals, settle graces, reconnects)
# rather than on the CPU:
#
#   engine  the engine/replay package with the race detector, but for its long
#           fault cases (ENGINE_LATE)
#   rest    every other package but NORACE's with the race detector
#   100k    the whole-DLQ replays of 100,000 without the race detector
#           (engine, -run Of100k; docs/reliability.md says which run where),
#           then the NORACE packages, then the pacing test at its full size
#           (TestPaceToConsumerOf3000), then the engine's long fault cases
#           (ENGINE_LATE) with the race detector: they wait on reconnects
#           and graces far more than they compute, and start once the
#           compiling and the replays of 100,000 are over (after the rest
#           lane's packages they would make it the longest lane by minutes)
#
# go vet (make vet) and fuzzing past the seed corpora (make fuzz) are not
# part of it: the suite is bound by the CPU of two cores, and each took a
# minute of it. .ci/run runs make vet before make test; every fuzz target's
# seed corpus runs as a test here.
#
# Each lane writes bin/test/<lane>.log, printed when the lane ends with its
# wall time; the script fails when any lane failed, after all have ended.
# Environment: PKGS (default ./...), ENGINE_PARALLEL (8:
# engine tests at once), ENGINE_LATE_PARALLEL (8: the long fault cases at
# once, which mostly wait), PARALLEL (4: tests at once in the other
# packages), PARALLEL_100K (8), TESTFLAGS (more go test flags, e.g. -v) and
# GO.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
PKGS=${PKGS:-./...}
ENGINE_PARALLEL=${ENGINE_PARALLEL:-8}
ENGINE_LATE_PARALLEL=${ENGINE_LATE_PARALLEL:-8}
PARALLEL=${PARALLEL:-4}
PARALLEL_100K=${PARALLEL_100K:-8}
TESTFLAGS=${TESTFLAGS:-}
logs=bin/test
mkdir -p "$logs"

engine=github.com/stroma/dlqbot/engine/replay
# NORACE names the packages whose code and tests start no goroutine and
# share nothing (the Slack blocks' rendering): the race detector has
# nothing to find there and makes their big layouts several times slower,
# so the 100k lane runs them without it.
NORACE=' github.com/stroma/dlqbot/blocks '
# shellcheck disable=SC2086 # PKGS is a list of patterns
mapfile -t all < <($GO list $PKGS) || exit 1
rest=()
norace=()
has_engine=
for p in "${all[@]}"; do
  if [ "$p" = "$engine" ]; then
    has_engine=1
  elif [[ "$NORACE" == *" $p "* ]]; then
    norace+=("$p")
  else
    rest+=("$p")
  fi
done

# ENGINE_LATE names the engine's long fault cases the rest lane runs once
# its packages are done: about two fifths of the engine's test time, and
# hardly any of its CPU.
ENGINE_LATE='^(TestResendInDoubtAfterThreeConnectionLosses|TestAnotherReaderTakesFromTheDLQAfterAFault|TestPacedReplayKeepsItsPaceWhileTheManagementAPIHangs|TestASettlingCursorGivesWayToAnotherReplay|TestUnpacedReplaySettlesItsStepsEarly|TestConnectionLostInAChunkedStep|TestConnectionsClosedMidReplayLoseNothing|TestUnpacedReplayConnectionLostEnds|TestAConnectionLostInAReplayFromItsApprovalsRead)$'

lane_engine() {
  $GO test $TESTFLAGS -race -count=1 -timeout 20m -parallel "$ENGINE_PARALLEL" -skip "$ENGINE_LATE" ./engine/replay/
}
lane_rest() {
  local rc=0
  if [ ${#rest[@]} -gt 0 ]; then
    $GO test $TESTFLAGS -race -count=1 -timeout 20m -parallel "$PARALLEL" "${rest[@]}" || rc=1
  fi
  return $rc
}
lane_100k() {
  local rc=0
  if [ -n "$has_engine" ]; then
    $GO test $TESTFLAGS -count=1 -timeout 15m -parallel "$PARALLEL_100K" -run 'Of100k' ./engine/replay/ || rc=1
  fi
  if [ ${#norace[@]} -gt 0 ]; then
    $GO test $TESTFLAGS -count=1 -timeout 10m "${norace[@]}" || rc=1
  fi
  if [ -n "$has_engine" ]; then
    # Pacing to a consumer of 50 msg/s, held to 1.3× the consumer alone:
    # last, when the other lanes' busiest part is over; -parallel 3 so
    # that the consumer alone, rate=auto and rate=max run at once.
    $GO test $TESTFLAGS -count=1 -timeout 10m -parallel 3 -run '^TestPaceToConsumerOf3000$' ./engine/replay/ || rc=1
    # The long fault cases, with the race detector: they mostly wait.
    $GO test $TESTFLAGS -race -count=1 -timeout 15m -parallel "$ENGINE_LATE_PARALLEL" -run "$ENGINE_LATE" ./engine/replay/ || rc=1
  fi
  return $rc
}

# cputime prints the CPU seconds (user + system) the brokers' Erlang VMs
# have used so far, for the closing line: the suite's wall time is bound
# by the CPU of the two, not by the tests' waits.
cputime() {
  local t=0 p
  for p in $(pgrep beam.smp 2>/dev/null); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo $((t / $(getconf CLK_TCK)))
}
beam0=$(cputime)
self0=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)

lanes=(rest 100k)
[ -n "$has_engine" ] && lanes=(engine rest 100k)
start=$(date +%s)
declare -A pid_lane began
# lane runs lane_<name> and ends its log with the CPU seconds it used
# (its go commands and tests: the subshell's children, once waited for).
lane() {
  local rc=0 me=$BASHPID
  "lane_$1" || rc=1
  echo "lane $1: $(awk '{print int(($16 + $17) / '"$(getconf CLK_TCK)"')}' "/proc/$me/stat") s of CPU"
  return $rc
}
for l in "${lanes[@]}"; do
  began[$l]=$(date +%s)
  lane "$l" >"$logs/$l.log" 2>&1 &
  pid_lane[$!]=$l
  echo "test: lane $l started (bin/test/$l.log)"
done

failed=()
for _ in "${lanes[@]}"; do
  wait -n -p done_pid
  rc=$?
  l=${pid_lane[$done_pid]}
  took=$(($(date +%s) - ${began[$l]}))
  echo "=== lane $l: $([ $rc -eq 0 ] && echo ok || echo FAILED) in $((took / 60))m$((took % 60))s"
  cat "$logs/$l.log"
  [ $rc -eq 0 ] || failed+=("$l")
done
took=$(($(date +%s) - start))
self1=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
echo "test: all lanes in $((took / 60))m$((took % 60))s; CPU: go and the tests $(((self1 - self0) / $(getconf CLK_TCK)))s, the brokers $(($(cputime) - beam0))s, of $((took * $(nproc)))s on $(nproc) cores"
if [ ${#failed[@]} -gt 0 ]; then
  echo "test: FAILED: ${failed[*]}"
  exit 1
fi
