// Package bench measures dlqbot as a user runs it: the built binary's
// `preview <dlq> … --json` and `replay <token> rate=max --json` in the
// operator's direct mode (DLQBOT_ACCESS=open) with the binary's own
// defaults, each beside its reference program in the same run, on a DLQ fed
// through the default exchange and on one bound to a dead-letter exchange.
// `make bench` (scripts/bench.sh) runs it and writes the figures to
// docs/benchmarks.md.
//
// Files:
//   - doc.go: this description.
//   - binary_bench_test.go: BenchmarkBinary, the whole and the filtered
//     replay through the binary against their references.
//   - run_test.go: running the binary and reading its peak RSS.
//   - movers_test.go: the reference programs written here (the
//     confirm-then-ack mover is testkit.MinimalMove; the one-pass filtered
//     mover) and the DLQ fixtures.
package bench
