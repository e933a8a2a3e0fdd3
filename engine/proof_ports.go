package engine

import (
	"context"

	"github.com/stroma/dlqbot/engine/proof"
)

// The approval's proof that no previewed message left the DLQ is package
// proof's: a preview begins it (Prover.Begin and Keep) and an approval
// proves by it (Prover.Prove). The names below are proof's, given here too
// for the packages outside the engine (the store keeps an ApprovalProof in
// every token; engine/amqp implements Watches): the same types, not copies.
type (
	ApprovalProof = proof.Proof
	Watches       = proof.Watches
	WatchLook     = proof.WatchLook
)

// newProver returns the Service's Prover, tuned by cfg (its defaults set)
// and looking through d's ports.
func newProver(cfg Config, d Deps) *proof.Prover {
	pd := proof.Deps{Clock: d.Clock, Broker: proofBroker{d.Broker}, Watches: d.Watches}
	if d.Counters != nil {
		pd.Counters = proofCounters{d.Counters}
	}
	return proof.New(proof.Config{
		From:        cfg.ProofFrom,
		StatsLag:    cfg.StatsLag,
		Wait:        cfg.ProofWait,
		Poll:        cfg.SettlePoll,
		TokenTTL:    cfg.TokenTTL,
		Unsupported: ErrUnsupported,
		Log:         cfg.Log,
	}, pd)
}

// proofBroker serves proof's Broker from the engine's.
type proofBroker struct{ b Broker }

func (p proofBroker) Inspect(ctx context.Context, queue string) (proof.Queue, error) {
	st, err := p.b.Inspect(ctx, queue)
	return proofQueue(st), err
}

// proofCounters serves proof's CounterReader from the engine's.
type proofCounters struct{ c CounterReader }

func (p proofCounters) Counters(ctx context.Context, queue string) (proof.Counters, error) {
	cs, err := p.c.Counters(ctx, queue)
	return proof.Counters{Ready: cs.Ready, Unacked: cs.Unacked, Consumers: cs.Consumers,
		Ack: cs.Ack, SampledAt: cs.SampledAt, Lapsed: cs.Lapsed}, err
}

// proofQueue is what proof needs of a queue's passive declare.
func proofQueue(q QueueInfo) proof.Queue {
	return proof.Queue{Name: q.Name, Exists: q.Exists, Ready: q.Ready, Consumers: q.Consumers}
}

// proofRead is what proof needs of the preview's read.
func proofRead(info ScanInfo) proof.Read {
	return proof.Read{Whole: info.Coverage.Whole(), Ready: info.Coverage.Ready, Duration: info.Duration}
}

// proofPreview is what proof proves an approval of f against.
func proofPreview(f Frozen) proof.Preview {
	return proof.Preview{DLQ: f.DLQ, CreatedAt: f.CreatedAt, Proof: f.Proof}
}
