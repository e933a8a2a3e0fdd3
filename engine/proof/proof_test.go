package proof

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// off is a Prover's ports with the statistics and the watches switched
// off (a read of the counters fails, no DLQ can be watched), as the
// engine's are when neither can serve.
var off = Deps{Counters: countersOff{}, Watches: watchesOff{}}

// countersOff is the management statistics switched off.
type countersOff struct{}

func (countersOff) Counters(context.Context, string) (Counters, error) {
	return Counters{}, errors.New("statistics switched off in this test")
}

// watchesOff is the watches switched off: no DLQ can be watched.
type watchesOff struct{}

func (watchesOff) OpenWatch(_ context.Context, dlq string, _ time.Duration) (WatchLook, error) {
	return WatchLook{}, fmt.Errorf("open watch of %s: %w", dlq, engine.ErrUnsupported)
}

func (watchesOff) LookWatch(_ context.Context, dlq, _ string) (WatchLook, error) {
	return WatchLook{}, fmt.Errorf("look at watch of %s: %w", dlq, engine.ErrUnsupported)
}

func (watchesOff) CloseWatch(context.Context, string) error { return nil }

// TestKeepOnlyAWholeRead: a proof survives the preview's read only when
// the read saw the whole DLQ it sampled, and then carries the read's time.
func TestKeepOnlyAWholeRead(t *testing.T) {
	p := New(Config{From: 10}, off)
	ctx := context.Background()
	if got := p.Keep(ctx, nil, Read{Whole: true}); got != nil {
		t.Fatalf("Keep(nil) = %+v, want nil", got)
	}
	for _, r := range []Read{{Whole: false, Ready: 5}, {Whole: true, Ready: 6}} {
		if got := p.Keep(ctx, &Proof{Ready: 5}, r); got != nil {
			t.Errorf("Keep after %+v = %+v, want nil (the read did not see the sampled DLQ whole)", r, got)
		}
	}
	got := p.Keep(ctx, &Proof{Ready: 5}, Read{Whole: true, Ready: 5, Duration: 3 * time.Second})
	if got == nil || got.Read != 3*time.Second {
		t.Fatalf("Keep after a whole read = %+v, want the proof with Read 3s", got)
	}
}

// TestProveNeedsAProofOfALargeDLQ: without a proof, below Config.From, or
// with neither a watch nor a sample to prove by, the approval compares.
func TestProveNeedsAProofOfALargeDLQ(t *testing.T) {
	p := New(Config{From: 10}, off)
	ctx := context.Background()
	for _, pr := range []*Proof{nil, {Ready: 9, SampledAt: time.Now()}, {Ready: 10}} {
		if p.Prove(ctx, Preview{DLQ: "q", Proof: pr}) {
			t.Errorf("Prove(%+v) = true, want false", pr)
		}
	}
}

// TestBeginNeedsNoConsumerAndSomethingToProveBy: a DLQ with a consumer,
// or one with neither counters nor watches to look at, freezes no proof.
func TestBeginNeedsNoConsumerAndSomethingToProveBy(t *testing.T) {
	p := New(Config{From: 10}, off)
	ctx := context.Background()
	for _, q := range []Queue{{Name: "q", Exists: true, Ready: 50, Consumers: 1}, {Name: "q", Exists: true, Ready: 50}} {
		if got := p.Begin(ctx, q); got != nil {
			t.Errorf("Begin(%+v) = %+v, want nil", q, got)
		}
	}
}
