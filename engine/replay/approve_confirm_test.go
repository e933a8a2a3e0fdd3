package replay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestApprovalBoundToTheConfirmedChanges: an approver is shown what changed
// since the preview (the target lost its consumer) and confirms exactly
// that, by its digest. A previewed message is taken from the DLQ between
// the confirm and the approval: the approval is refused, nothing is sent,
// and the refusal shows the new change beside the confirmed one. Confirming
// what it showed then approves, and the replay sends what is still there;
// its record keeps the front end the approval came through.
func TestApprovalBoundToTheConfirmedChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A compare that misses a previewed message waits for a management
	// sample StatsLag newer than its read before it believes it gone; the
	// message here is really gone, so a short lag only saves time.
	cfg := fast
	cfg.Tune.StatsLag = time.Second
	e := newEnv(t, cfg)
	r := e.rabbit
	const n = 10
	src, dlq := r.DeadLettered(n, 100)
	consumer := r.Consume(src, func(amqp.Delivery) string { return "ack" })
	p := preview(t, e, engine.Selection{DLQ: dlq})
	consumer.Stop()

	_, shown, err := e.svc.Compare(ctx, p.Token)
	if err != nil || changed(shown, engine.ChangeConsumersGone) == 0 {
		t.Fatalf("compare after the consumer left: %v, changes %+v; want consumers_gone", err, shown)
	}
	confirmed := engine.ChangesDigest(shown)

	// A change lands after the approver looked: one previewed message is
	// consumed from the DLQ by someone else.
	testkit.Eventually(t, 30*time.Second, "the preview's give-backs in the DLQ", func() bool { return r.Count(dlq) == n })
	_ = r.Take(dlq, 1)
	prm := engine.Params{Step: 100, Cap: 100, Rate: -1, Timeout: 20 * time.Second}
	ap, err := e.svc.ApproveConfirmed(ctx, p.Token, "U_APP", "slack", prm, confirmed)
	if !errors.Is(err, engine.ErrChanged) {
		t.Fatalf("approval confirming only the consumer's leaving: %v, replay %q; want ErrChanged", err, ap.Replay.ID)
	}
	if changed(ap.Changes, engine.ChangeMessagesGone) != 1 || changed(ap.Changes, engine.ChangeConsumersGone) == 0 {
		t.Fatalf("refusal shows %+v; want the message gone beside the consumers gone", ap.Changes)
	}
	if got := r.Count(dlq); got != n-1 {
		t.Fatalf("DLQ holds %d after the refused approval, want %d", got, n-1)
	}
	if got := r.Count(src); got != 0 {
		t.Fatalf("the target holds %d after the refused approval: something was sent", got)
	}

	// An approval that confirmed nothing is refused the same way.
	if _, err := e.svc.ApproveConfirmed(ctx, p.Token, "U_APP", "slack", prm, ""); !errors.Is(err, engine.ErrChanged) {
		t.Fatalf("approval confirming nothing: %v, want ErrChanged", err)
	}

	// Confirming what the refusal showed approves it.
	ap, err = e.svc.ApproveConfirmed(ctx, p.Token, "U_APP", "terminal", prm, engine.ChangesDigest(ap.Changes))
	if err != nil {
		t.Fatalf("approval confirming the changes shown: %v, changes %+v", err, ap.Changes)
	}
	rep, err := e.svc.Run(ctx, ap.Replay.ID, "owner")
	if err != nil || rep.Sent != n-1 {
		t.Fatalf("run: %v, %s, sent %d, want %d", err, rep.State, rep.Sent, n-1)
	}
	if rep.ApprovedVia != "terminal" {
		t.Errorf("the replay's record says it was approved via %q, want the approval's front end, terminal", rep.ApprovedVia)
	}
	testkit.Eventually(t, 20*time.Second, "the copies in the target", func() bool { return r.Count(src) == n-1 })
	if got := r.Count(dlq); got != 0 {
		t.Fatalf("DLQ holds %d after the replay, want 0", got)
	}
}
