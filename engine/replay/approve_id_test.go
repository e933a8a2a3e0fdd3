package replay_test

import (
	"context"
	"errors"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestDeletedUsedMarkerStartsNoSecondReplay: a token whose replay ran to
// finished, its used marker then deleted in Redis, is refused token_used
// on a second approval (confirmed, the same messages back in the DLQ): no second replay record exists and the DLQ is as the
// first replay left it.
func TestDeletedUsedMarkerStartsNoSecondReplay(t *testing.T) {
	t.Parallel()
	e, rdb, prefix := newSignedEnv(t)
	ctx := context.Background()
	src, dlq := e.rabbit.DeadLettered(3, 50)
	e.rabbit.Consume(src, func(amqp091.Delivery) string { return "ack" })
	tok := preview(t, e, engine.Selection{DLQ: dlq}).Token
	first := approveRun(t, e, tok, oneStep, false)
	if first.State != engine.StateFinished {
		t.Fatalf("first replay %s, want finished", first.State)
	}
	if first.ID != engine.TokenReplayID(tok, 0) {
		t.Fatalf("replay id %s is not the token's first id %s", first.ID, engine.TokenReplayID(tok, 0))
	}
	used := prefix + "{" + tok + "}:used" // store/keys.go's layout
	if n, err := rdb.Del(ctx, used).Result(); err != nil || n != 1 {
		t.Fatalf("delete the used marker: %d, %v", n, err)
	}
	e.rabbit.Publish(dlq, testkit.Msgs(3, 50)...) // the same messages, back in the DLQ
	_, err := replay.Approve(e.svc, ctx, tok, "U_OTHER", oneStep, true)
	if !errors.Is(err, engine.ErrTokenUsed) {
		t.Fatalf("second approval: %v, want token used", err)
	}
	list, err := e.store.Replays().List(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != first.ID {
		t.Fatalf("replays %+v, want only %s", list, first.ID)
	}
	if n := e.rabbit.Count(dlq); n != 3 {
		t.Fatalf("the DLQ holds %d, want the 3 put back: nothing may be sent", n)
	}
}
