package store

import (
	"errors"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

func TestTokenMessageLivesWithTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok, err := e.st.Tokens().Save(e.ctx, engine.Frozen{DLQ: "orders.dlq"}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if ch, ts, err := e.st.Tokens().Message(e.ctx, tok); err != nil || ch != "" || ts != "" {
		t.Fatalf("before: %q %q %v, want nothing recorded", ch, ts, err)
	}
	if err := e.st.Tokens().SetMessage(e.ctx, tok, "C1", "1732900000.000100"); err != nil {
		t.Fatal(err)
	}
	if ch, ts, err := e.st.Tokens().Message(e.ctx, tok); err != nil || ch != "C1" || ts != "1732900000.000100" {
		t.Fatalf("after: %q %q %v", ch, ts, err)
	}
	if err := e.st.Tokens().SetMessage(e.ctx, "p_unknowntoken000000000", "C1", "1"); !errors.Is(err, engine.ErrTokenNotFound) {
		t.Fatalf("unknown token: %v, want ErrTokenNotFound", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		ch, _, err := e.st.Tokens().Message(e.ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if ch == "" {
			break // expired with the token
		}
		if time.Now().After(deadline) {
			t.Fatal("the preview's message outlived its token")
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}
