// Package proof proves, at an approval, that no previewed message left the
// DLQ since its preview, without reading the DLQ again: a compare reads the
// whole DLQ, and the broker's own counts can often show that nothing left
// (docs/design.md "Approval without a read" and "The watch").
//
// It owns that proof and nothing else, as one type, Prover: Begin, before
// the preview's read, samples the DLQ's ready count and management counters
// and opens a watch; Keep, after the read, keeps the Proof only when the
// read saw the whole DLQ; the Proof is frozen in the preview's token; Prove,
// at the approval, decides from the watch or the counters whether the DLQ
// is unchanged (false: the approval compares); Close deletes the watch once
// the Proof has done its work.
//
// It knows no token and no replay: it looks at the broker through its own
// small ports (Broker, CounterReader, Clock, and the engine's Watches) and
// takes the preview's numbers as its own values (Queue, Read, Preview). Of
// the module it imports package engine only, for the two types a token and
// engine/amqp share with it (engine.ApprovalProof, its Proof; and
// engine.Watches with engine.WatchLook); internal/doccheck checks this.
// engine/review serves its ports from its own
// (engine/review/proof_ports.go).
//
// Where each part lives:
//
//	proof.go  Proof (what a preview freezes), Prover and its New; Begin and
//	          Keep at the preview; Prove at the approval, by the management
//	          counters (the sample that has caught up with the preview and
//	          the approval), after the watch
//	watch.go  the watch: opened by Begin, closed by Close, and its verdict
//	          (what reached the DLQ since the preview, against what left)
//	ports.go  Config and Deps; the ports Broker, CounterReader, Watches and
//	          Clock, and the values they and the engine hand over (Queue,
//	          Counters, WatchLook, Read, Preview)
package proof
