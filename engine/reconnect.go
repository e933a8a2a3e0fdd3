package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A paced replay outlives the loss of the broker node it worked through.
// When a step ends because the connection was lost (the node died, was
// restarted for an upgrade, or closed the connection), the run does not
// stop: it waits until the broker answers again — the adapter dials the
// next node of its list, or the load balancer picks a live one — and then
// for the messages its reader held through the lost connection. A quorum
// queue keeps what a consumer on a vanished node held checked out for that
// node until the node is back or forgotten: those messages are neither
// sent nor missing, and the step that follows would not find them. So the
// run waits until the broker reports nothing unacknowledged on the DLQ (as
// findRest does before it calls anything missing), saying so in the
// record's note, settles the step the loss cut, reconciles its counts with
// the DLQ (reconcile.go: originals acked just before the loss that came
// back are duplicates), and goes on with its plan. Copies in flight at the
// loss are in doubt, as after any lost connection; a paced replay that
// goes on sends them again first, in the same run, marked
// PossibleDuplicateHeader exactly as resume resend=in-doubt does
// (resendAfterLoss), so that it can finish without a person's action: at
// its pace only the few copies in flight at the loss are in doubt.
//
// An unpaced replay stops instead, resumable: at full speed a lost
// connection leaves many copies in doubt, which a person should look at
// before it goes on. Before it stops it settles the cut step and
// reconciles its counts too, when the broker answers, and its note says
// what is left.

// EventWaiting reports a running replay that waits for the broker after
// losing its node (the text says for what).
const EventWaiting EventKind = "waiting"

// NodeLostError is a broker connection that was established and then lost
// (its node died or closed it), as opposed to one that could not be made.
// It is ErrBrokerUnavailable too.
type NodeLostError struct {
	// Node names the node the connection went to (host:port, no
	// credentials).
	Node string
	Err  error
}

func (e *NodeLostError) Error() string {
	return fmt.Sprintf("%v: lost the connection through node %s: %v", ErrBrokerUnavailable, e.Node, e.Err)
}

// Unwrap makes errors.Is find ErrBrokerUnavailable and the cause.
func (e *NodeLostError) Unwrap() []error { return []error{ErrBrokerUnavailable, e.Err} }

// rejoin decides whether a step that failed with err goes on after a lost
// node: for a paced replay whose connection was lost it waits (up to
// Config.Reconnect) for the broker and for the messages held through the
// lost node, and returns nil when the run goes on — also when a pause,
// cancel or shutdown came meanwhile, which the loop then acts on. Any other
// error, and a wait that ran out, is returned for halt (the replay stops,
// resumable).
func (rn *run) rejoin(ctx context.Context, err error) error {
	var lost *NodeLostError
	rn.markLost(err)
	if rn.s.cfg.Reconnect < 0 || rn.r.Params.Rate <= 0 || !errors.As(err, &lost) {
		if !errors.Is(err, ErrBrokerUnavailable) || errors.Is(err, ErrManagementDown) || rn.stopCause(ctx) != nil {
			return err
		}
		// Stopping: settle what the cut step sent and count the
		// duplicates now, if the broker answers, so that the stop says
		// exactly what is left (reconcile.go).
		if aerr := rn.afterLoss(ctx); aerr != nil {
			return fmt.Errorf("%w; %w", err, aerr)
		}
		return fmt.Errorf("%w; %s", err, rn.lossNote())
	}
	since := rn.s.d.Clock.Now()
	deadline := since.Add(rn.s.cfg.Reconnect)
	node := lost.Node
	rn.wait(ctx, fmt.Sprintf("lost the broker connection through node %s; reconnecting through another node (up to %s)", node, rn.s.cfg.Reconnect))
	held := -1
	for {
		if rn.stopCause(ctx) != nil {
			return nil
		}
		quiet, n, werr := rn.heldThrough(ctx, since)
		switch {
		case werr == nil && quiet:
			if aerr := rn.afterLoss(ctx); aerr != nil {
				return fmt.Errorf("%w; %w", err, aerr)
			}
			if rerr := rn.resendAfterLoss(ctx); rerr != nil {
				return fmt.Errorf("%w; %w", err, rerr)
			}
			rn.r.Note = ""
			rn.emit(ctx, EventWaiting, nil, fmt.Sprintf("reconnected after losing node %s; nothing of %s is held any more: going on", node, rn.r.DLQ))
			return nil
		case werr == nil && n != held:
			held = n
			what := "the message(s)"
			if n > 0 {
				what = fmt.Sprintf("%d message(s)", n)
			}
			rn.wait(ctx, fmt.Sprintf("waiting for %s the reader held through node %s, which left the cluster: neither missing nor sent, they return to %s when the node is back", what, node, rn.r.DLQ))
		case errors.Is(werr, ErrManagementDown):
			// Only the API's counts tell whether the lost node's reader
			// still holds messages: the replay stops, naming it
			// (settle_api.go), rather than wait on it.
			return fmt.Errorf("%w; %w", err, werr)
		case werr != nil && !errors.Is(werr, ErrBrokerUnavailable) && !errors.Is(werr, ErrQueueNotFound):
			// A classic DLQ on the lost node is not found until it is
			// back: waited for too; anything else stops the replay.
			return werr
		}
		if rn.s.d.Clock.Now().After(deadline) {
			if werr != nil {
				return fmt.Errorf("%w; the broker did not answer through another node within %s; %s", err, rn.s.cfg.Reconnect, rn.lossNote())
			}
			return fmt.Errorf("%w; waited %s for the messages held through node %s (still %d unacknowledged in %s); resume once it is back; %s", err, rn.s.cfg.Reconnect, node, max(held, 0), rn.r.DLQ, rn.lossNote())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-rn.s.d.Clock.After(rn.s.cfg.SettlePoll):
		}
	}
}

// heldThrough asks the broker whether anyone still holds messages of the
// DLQ: quiet when it has no consumer and a management sample taken after
// since (plus StatsLag) counts nothing unacknowledged; n is the
// unacknowledged count of the newest sample.
func (rn *run) heldThrough(ctx context.Context, since time.Time) (quiet bool, n int, err error) {
	st, err := rn.s.d.Broker.Inspect(ctx, rn.r.DLQ)
	if err != nil {
		return false, 0, err
	}
	if !st.Exists {
		return false, 0, fmt.Errorf("%s: %w", rn.r.DLQ, ErrQueueNotFound)
	}
	if rn.s.d.Counters == nil {
		return st.Consumers == 0, 0, nil
	}
	cs, err := rn.s.d.Counters.Counters(ctx, rn.r.DLQ)
	if err != nil {
		return false, 0, err
	}
	fresh := !cs.SampledAt.IsZero() && cs.SampledAt.After(since.Add(rn.s.cfg.StatsLag))
	return fresh && st.Consumers == 0 && cs.Unacked == 0 && cs.Consumers == 0, cs.Unacked, nil
}

// wait says in the record (still running) and in an event what the run
// waits for.
func (rn *run) wait(ctx context.Context, text string) {
	rn.r.Note = text
	if err := rn.put(ctx); err != nil {
		rn.warn("write waiting note", err)
	}
	rn.emit(ctx, EventWaiting, nil, text)
}
