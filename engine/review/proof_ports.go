package review

import (
	"context"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/proof"
)

// newProver returns the Service's Prover, tuned by cfg (its defaults set)
// and looking through d's ports.
func newProver(cfg Config, d Deps) *proof.Prover {
	pd := proof.Deps{Clock: d.Clock, Broker: proofBroker{d.Broker}, Counters: proofCounters{d.Counters}, Watches: d.Watches}
	return proof.New(proof.Config{
		From:        cfg.Tune.ProofFrom,
		StatsLag:    cfg.Tune.StatsLag,
		Wait:        cfg.Tune.ProofWait,
		Poll:        cfg.SettlePoll,
		TokenTTL:    cfg.Tune.TokenTTL,
		Unsupported: engine.ErrUnsupported,
		Log:         cfg.Log,
	}, pd)
}

// proofBroker serves proof's Broker from the engine's.
type proofBroker struct{ b engine.Broker }

func (p proofBroker) Inspect(ctx context.Context, queue string) (proof.Queue, error) {
	st, err := p.b.Inspect(ctx, queue)
	return proofQueue(st), err
}

// proofCounters serves proof's CounterReader from the engine's.
type proofCounters struct{ c engine.CounterReader }

func (p proofCounters) Counters(ctx context.Context, queue string) (proof.Counters, error) {
	cs, err := p.c.Counters(ctx, queue)
	return proof.Counters{Ready: cs.Ready, Unacked: cs.Unacked, Consumers: cs.Consumers,
		Ack: cs.Ack, SampledAt: cs.SampledAt, Lapsed: cs.Lapsed}, err
}

// proofQueue is what proof needs of a queue's passive declare.
func proofQueue(q engine.QueueInfo) proof.Queue {
	return proof.Queue{Name: q.Name, Exists: q.Exists, Ready: q.Ready, Consumers: q.Consumers}
}

// proofRead is what proof needs of the preview's read.
func proofRead(info engine.ScanInfo) proof.Read {
	return proof.Read{Whole: info.Coverage.Whole(), Ready: info.Coverage.Ready, Duration: info.Duration}
}

// proofPreview is what proof proves an approval of f against.
func proofPreview(f engine.Frozen) proof.Preview {
	return proof.Preview{DLQ: f.DLQ, CreatedAt: f.CreatedAt, Proof: f.Proof}
}
