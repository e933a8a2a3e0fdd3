package testkit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// Ports of the engine switched off. The engine requires every port
// production sets (engine/review's Deps); a test that wants the engine's
// behaviour without one of those capabilities gives it one of these. Each
// models only "this capability is off", the way the capability answers
// when it cannot serve: the real broker and Redis still carry the test.

// ErrOff is what a switched-off port answers where it must fail.
var ErrOff = errors.New("testkit: switched off in this test")

// TapOff is the tap capability switched off: every DLQ is declined, as
// the broker adapter declines a DLQ it cannot tap (TapState and EnsureTap
// say ReturnsReread, with the reason Reason), so every replay re-reads its
// DLQ. It serves Taps, Returns and TapGaps: no tap is registered, no
// replay has a tap record (ReturnRecord.Tapped false) and no window
// without a tap is recorded.
type TapOff struct{}

// TapOffReason is the reason TapOff gives for declining a DLQ.
const TapOffReason = "this bot has no tap support configured"

var (
	_ engine.Taps    = TapOff{}
	_ engine.Returns = TapOff{}
	_ engine.TapGaps = TapOff{}
)

func (TapOff) TapState(_ context.Context, dlq string) (engine.TapState, error) {
	return engine.TapState{DLQ: dlq, Mode: engine.ReturnsReread, Reason: TapOffReason}, nil
}

func (o TapOff) EnsureTap(ctx context.Context, dlq string) (engine.TapState, error) {
	return o.TapState(ctx, dlq)
}

func (TapOff) DrainTap(context.Context, string, func([]letter.Message) error) (int, error) {
	return 0, nil
}

func (TapOff) WatchTap(_ context.Context, dlq string, _ func([]letter.Message) error) error {
	return fmt.Errorf("watch tap of %s: %w", dlq, ErrOff)
}

func (TapOff) Record(context.Context, string, []engine.ReturnEvent, int) error { return nil }

func (TapOff) Begin(context.Context, string, string) error { return nil }

func (TapOff) Returned(context.Context, string, int) (engine.ReturnRecord, error) {
	return engine.ReturnRecord{}, nil
}

func (TapOff) Arrived(context.Context, string) (int64, error) { return 0, nil }

func (TapOff) AddTap(context.Context, string) error { return nil }

func (TapOff) Tapped(context.Context) ([]string, error) { return nil, nil }

func (TapOff) RemoveTap(context.Context, string) error { return nil }

func (TapOff) AddTapGap(context.Context, string, engine.TapGap) error { return nil }

func (TapOff) TapGaps(context.Context, string) ([]engine.TapGap, error) { return nil, nil }

// CountersOff is the management statistics switched off: every read of a
// queue's counters fails (ErrOff), so no step is proven settled by them
// and no proof is frozen from them. Where a read that fails differs from
// having no counters at all, a strict wait for a quiet DLQ waits to its
// deadline, as it does while the API does not answer.
type CountersOff struct{}

var _ engine.CounterReader = CountersOff{}

func (CountersOff) Counters(_ context.Context, queue string) (engine.QueueCounters, error) {
	return engine.QueueCounters{}, fmt.Errorf("counters of %s: %w", queue, ErrOff)
}

// ConsumersOff is the listing of a target's consumers switched off: every
// listing fails, so a preview's verdict on them is unknown.
type ConsumersOff struct{}

var _ engine.ConsumerLister = ConsumersOff{}

func (ConsumersOff) QueueConsumers(_ context.Context, queue string) ([]engine.ConsumerConn, error) {
	return nil, fmt.Errorf("consumers of %s: %w", queue, ErrOff)
}

// WatchesOff is the watch switched off: no DLQ can be watched
// (engine.ErrUnsupported, as the adapter says of a DLQ it cannot watch),
// so an approval proves by the statistics or compares.
type WatchesOff struct{}

var _ engine.Watches = WatchesOff{}

func (WatchesOff) OpenWatch(_ context.Context, dlq string, _ time.Duration) (engine.WatchLook, error) {
	return engine.WatchLook{}, fmt.Errorf("open watch of %s: %w: switched off in this test", dlq, engine.ErrUnsupported)
}

func (WatchesOff) LookWatch(_ context.Context, dlq, _ string) (engine.WatchLook, error) {
	return engine.WatchLook{}, fmt.Errorf("look at watch of %s: %w: switched off in this test", dlq, engine.ErrUnsupported)
}

func (WatchesOff) CloseWatch(context.Context, string) error { return nil }

// ClaimsOff is the claims switched off: every claim is granted and
// nothing is recorded, so no replay learns of another's messages, reads
// or marks (overlapping replays race for the messages).
type ClaimsOff struct{}

var _ engine.Claims = ClaimsOff{}

func (ClaimsOff) Claim(context.Context, string, string, []string, time.Time, time.Duration) (map[string]engine.Claim, error) {
	return nil, nil
}

func (ClaimsOff) Own(context.Context, string, string, []string, time.Time, bool, []string) (map[string]engine.Claim, map[string]engine.Claim, error) {
	return nil, nil, nil
}

func (ClaimsOff) Settle(context.Context, string, string, []string, []string) error { return nil }

func (ClaimsOff) Holders(context.Context, string, string, []string) (map[string]engine.Claim, error) {
	return nil, nil
}

func (ClaimsOff) Summary(context.Context, string) ([]engine.ClaimsBy, bool, error) {
	return nil, false, nil
}

func (ClaimsOff) Readers(context.Context, string, string) ([]string, error) { return nil, nil }

func (ClaimsOff) Reading(context.Context, string, string, bool, int, time.Duration) error { return nil }

func (ClaimsOff) Holding(context.Context, string) (map[string]int, error) { return nil, nil }

func (ClaimsOff) DoneReading(context.Context, string, string) error { return nil }

func (ClaimsOff) ReadSince(context.Context, string, string, time.Time) ([]string, error) {
	return nil, nil
}

func (ClaimsOff) Seekers(context.Context, string, string) ([]string, error) { return nil, nil }

func (ClaimsOff) Cursors(context.Context, string, string) ([]string, error) { return nil, nil }
