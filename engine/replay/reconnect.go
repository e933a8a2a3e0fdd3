package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// rejoin decides whether a step that failed with err goes on after a lost
// node: for a paced replay whose connection was lost it waits (up to
// Config.Tune.Reconnect) for the broker and for the messages held through the
// lost node, and returns nil when the run goes on — also when a pause,
// cancel or shutdown came meanwhile, which the loop then acts on. Any other
// error, and a wait that ran out, is returned for halt (the replay stops,
// resumable).
func (rc *recovery) rejoin(ctx context.Context, err error) error {
	var lost *engine.NodeLostError
	rc.markLost(err)
	if rc.s.cfg.Tune.Reconnect < 0 || rc.rn.r.Params.Rate <= 0 || !errors.As(err, &lost) {
		if !errors.Is(err, engine.ErrBrokerUnavailable) || errors.Is(err, engine.ErrManagementDown) || rc.rn.stopCause(ctx) != nil {
			return err
		}
		// Stopping: settle what the cut step sent and count the
		// duplicates now, if the broker answers, so that the stop says
		// exactly what is left (reconcile.go).
		if aerr := rc.afterLoss(ctx); aerr != nil {
			return fmt.Errorf("%w; %w", err, aerr)
		}
		return fmt.Errorf("%w; %s", err, rc.lossNote())
	}
	since := rc.s.d.Clock.Now()
	deadline := since.Add(rc.s.cfg.Tune.Reconnect)
	node := lost.Node
	rc.wait(ctx, fmt.Sprintf("lost the broker connection through node %s; reconnecting through another node (up to %s)", node, rc.s.cfg.Tune.Reconnect))
	held := -1
	for {
		if rc.rn.stopCause(ctx) != nil {
			return nil
		}
		quiet, n, werr := rc.heldThrough(ctx, since)
		switch {
		case werr == nil && quiet:
			if aerr := rc.afterLoss(ctx); aerr != nil {
				return fmt.Errorf("%w; %w", err, aerr)
			}
			if rerr := rc.resendAfterLoss(ctx); rerr != nil {
				return fmt.Errorf("%w; %w", err, rerr)
			}
			rc.rn.r.Note = ""
			rc.rn.emit(ctx, engine.EventWaiting, nil, fmt.Sprintf("reconnected after losing node %s; nothing of %s is held any more: going on", node, rc.dlq))
			return nil
		case werr == nil && n != held:
			held = n
			what := "the message(s)"
			if n > 0 {
				what = fmt.Sprintf("%d message(s)", n)
			}
			rc.wait(ctx, fmt.Sprintf("waiting for %s the reader held through node %s, which left the cluster: neither missing nor sent, they return to %s when the node is back", what, node, rc.dlq))
		case errors.Is(werr, engine.ErrManagementDown):
			// Only the API's counts tell whether the lost node's reader
			// still holds messages: the replay stops, naming it
			// (settle_api.go), rather than wait on it.
			return fmt.Errorf("%w; %w", err, werr)
		case werr != nil && !errors.Is(werr, engine.ErrBrokerUnavailable) && !errors.Is(werr, engine.ErrQueueNotFound):
			// A classic DLQ on the lost node is not found until it is
			// back: waited for too; anything else stops the replay.
			return werr
		}
		if rc.s.d.Clock.Now().After(deadline) {
			if werr != nil {
				return fmt.Errorf("%w; the broker did not answer through another node within %s; %s", err, rc.s.cfg.Tune.Reconnect, rc.lossNote())
			}
			return fmt.Errorf("%w; waited %s for the messages held through node %s (still %d unacknowledged in %s); resume once it is back; %s", err, rc.s.cfg.Tune.Reconnect, node, max(held, 0), rc.dlq, rc.lossNote())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-rc.s.d.Clock.After(rc.s.cfg.SettlePoll):
		}
	}
}

// heldThrough asks the broker whether anyone still holds messages of the
// DLQ: quiet when it has no consumer and a management sample taken after
// since (plus StatsLag) counts nothing unacknowledged; n is the
// unacknowledged count of the newest sample.
func (rc *recovery) heldThrough(ctx context.Context, since time.Time) (quiet bool, n int, err error) {
	st, err := rc.s.d.Broker.Inspect(ctx, rc.dlq)
	if err != nil {
		return false, 0, err
	}
	if !st.Exists {
		return false, 0, fmt.Errorf("%s: %w", rc.dlq, engine.ErrQueueNotFound)
	}
	cs, err := rc.s.d.Counters.Counters(ctx, rc.dlq)
	if err != nil {
		return false, 0, err
	}
	fresh := !cs.SampledAt.IsZero() && cs.SampledAt.After(since.Add(rc.s.cfg.Tune.StatsLag))
	return fresh && st.Consumers == 0 && cs.Unacked == 0 && cs.Consumers == 0, cs.Unacked, nil
}

// wait says in the record (still running) and in an event what the run
// waits for.
func (rc *recovery) wait(ctx context.Context, text string) {
	rc.rn.r.Note = text
	if err := rc.rn.put(ctx); err != nil {
		rc.s.base.Warn(rc.id, rc.dlq, "write waiting note", err)
	}
	rc.rn.emit(ctx, engine.EventWaiting, nil, text)
}
