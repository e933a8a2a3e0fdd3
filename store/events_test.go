package store

import (
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

func TestEventsAppendRead(t *testing.T) {
	env := newEnv(t)
	st, ctx := env.st, env.ctx
	ev := st.Events()
	if _, got, err := ev.Read(ctx, "r_none", "", 10); err != nil || len(got) != 0 {
		t.Fatalf("unknown replay: %v, %v", got, err)
	}
	for i, k := range []engine.EventKind{engine.EventStarted, engine.EventStepPassed, engine.EventFinished} {
		e := engine.Event{Kind: k, Replay: engine.Replay{ID: "r_ev", Sent: i}, At: time.Unix(int64(i), 0).UTC()}
		if err := ev.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	ids, all, err := ev.Read(ctx, "r_ev", "", 10)
	if err != nil || len(all) != 3 || len(ids) != 3 || all[0].Kind != engine.EventStarted || all[2].Replay.Sent != 2 {
		t.Fatalf("read all = %+v, %v", all, err)
	}
	_, rest, err := ev.Read(ctx, "r_ev", ids[0], 1)
	if err != nil || len(rest) != 1 || rest[0].Kind != engine.EventStepPassed {
		t.Fatalf("read after the first = %+v, %v", rest, err)
	}
	if err := ev.Append(ctx, engine.Event{Kind: engine.EventStarted}); err == nil {
		t.Error("an event without a replay id was logged")
	}
	if ttl := st.b.rdb.PTTL(ctx, st.b.k.events("r_ev")).Val(); ttl <= 0 {
		t.Errorf("event log has no expiry: %s", ttl)
	}
}
