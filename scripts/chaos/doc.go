// Package chaos holds dlqbot's fault-injection runs (`make chaos`,
// scripts/chaos/chaos.sh). They are Go tests that run only with
// DLQBOT_CHAOS=1, so `make test` skips them, against the real RabbitMQ and
// Redis of the machine and the real dlqbot binary (built once per run, or
// DLQBOT_BIN):
//
//   - TestChaosSIGKILL kills the replaying process at 20 random points of
//     one 1,000-message replay, each time reporting the replay interrupted
//     and replaying the rest, and checks that nothing was lost and that every
//     duplicate delivery is accounted for in the ledger.
//   - TestChaosConnectionsClosed closes every broker connection of the
//     replaying server 10 times during a replay, resuming it each time.
//   - TestChaosRedisRestart kills a private Redis in the middle of a replay
//     and starts it again, with and without persistence, and reports what
//     the replay did.
//   - TestChaosSlackRequests sends 10,000 forged, stale and malformed
//     requests to the bot's HTTP handler.
//   - TestChaosUnpacedConnectionClosed closes the server's broker
//     connections as soon as an unpaced replay (rate=max) delivers, in up to
//     3 rounds: each close must end the replay within 60 s.
//   - TestChaosReadersDuringReplay runs `dlqbot preview` and `dlqbot check`
//     in loops while a replay runs.
//   - TestChaosControlEveryPhase pauses and cancels replays while they
//     send, settle, and between steps: each request must act within 1 s.
//   - TestChaosClusterNodeLoss SIGKILLs a node of the three-node RabbitMQ
//     4.3 cluster of scripts/cluster.sh (dlqbot's node, then the DLQ's
//     quorum leader) during a paced and an unpaced replay of 5,000 from a
//     quorum DLQ replicated on all three, and starts it 20 s later; the
//     paced replay must reach its end in the same run, nothing lost.
//   - TestChaosClusterRollingRestart stops and starts the three nodes in
//     turn during a paced replay of 20,000 (DLQBOT_CHAOS_ROLLING_N).
//
// The first three run twice, as subtests: on RabbitMQ 3.10 with a classic
// DLQ ("rabbit3-classic") and on RabbitMQ 4.0 with a quorum DLQ
// ("rabbit4-quorum", figures suffixed _rabbit4_quorum); the others run on
// 3.10.
//
// Each run prints its figures as "FIGURE <name>: …" lines and, when
// DLQBOT_CHAOS_OUT names a file, appends them there; docs/reliability.md
// quotes them with the command that reproduces each.
package chaos
