package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

func TestTokenSaveLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tk := e.st.Tokens()
	f := engine.Frozen{DLQ: "orders.dlq", Vhost: "/", Selection: "reason=rejected", Requester: "U1",
		Items: []engine.Item{{ID: "m1", Count: 2, Target: "orders", Group: "rejected", Seq: 3}}, Total: 2}
	tok, err := tk.Save(e.ctx, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) < 24 || tok[:2] != "p_" {
		t.Errorf("token %q: want p_ and ≥ 22 base64url characters", tok)
	}
	got, err := tk.Load(e.ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	if got.Token != tok || !got.CreatedAt.Equal(now) || !got.ExpiresAt.Equal(now.Add(24*time.Hour)) {
		t.Errorf("token fields: %q %v %v", got.Token, got.CreatedAt, got.ExpiresAt)
	}
	if !reflect.DeepEqual(got.Items, f.Items) || got.DLQ != f.DLQ || got.Total != 2 {
		t.Errorf("round trip: %+v", got)
	}
	ttl := e.rdb.PTTL(e.ctx, e.st.b.k.token(tok)).Val()
	if ttl < 23*time.Hour || ttl > 24*time.Hour {
		t.Errorf("redis TTL %s, want ~24h", ttl)
	}
	tok2, _ := tk.Save(e.ctx, f, 0)
	if tok2 == tok {
		t.Error("two saves gave one token")
	}
	for _, unknown := range []string{"p_unknown", "", "p_{x}"} {
		if _, err := tk.Load(e.ctx, unknown); !errors.Is(err, engine.ErrTokenNotFound) {
			t.Errorf("load %q: %v", unknown, err)
		}
	}
}

func TestTokenExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok, err := e.st.Tokens().Save(e.ctx, engine.Frozen{DLQ: "q"}, 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "token expiry", func() bool {
		_, err := e.st.Tokens().Load(e.ctx, tok)
		return errors.Is(err, engine.ErrTokenNotFound)
	})
	if err := e.st.Tokens().Consume(e.ctx, tok, "r_1"); !errors.Is(err, engine.ErrTokenNotFound) {
		t.Errorf("consume expired: %v", err)
	}
}

func TestTokenLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := engine.Frozen{DLQ: "big.dlq", Requester: "U1"}
	for i := range 100_000 {
		f.Items = append(f.Items, engine.Item{ID: fmt.Sprintf("%016x", uint64(i)*2654435761), Count: 1 + i%3,
			Target: fmt.Sprintf("target-%d", i%7), Group: "rejected/NullPointerException", Seq: i})
		f.Total += 1 + i%3
	}
	tok, err := e.st.Tokens().Save(e.ctx, f, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.st.Tokens().Load(e.ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Items, f.Items) || got.Total != f.Total {
		t.Fatalf("100k items did not round-trip: %d items", len(got.Items))
	}
	stored := e.rdb.StrLen(e.ctx, e.st.b.k.token(tok)).Val()
	raw, _ := json.Marshal(f)
	if stored >= int64(len(raw))/4 {
		t.Errorf("stored %d bytes: not compact", stored)
	}
	t.Logf("100k items: %d bytes of JSON stored in %d bytes", len(raw), stored)
}

func TestTokenConsumeOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tk := e.st.Tokens()
	tok, err := tk.Save(e.ctx, engine.Frozen{DLQ: "q"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if by, err := tk.UsedBy(e.ctx, tok); err != nil || by != "" {
		t.Errorf("unused token: %q %v", by, err)
	}
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = tk.Consume(e.ctx, tok, fmt.Sprintf("r_%d", i))
		})
	}
	close(start)
	wg.Wait()
	winner, used := -1, 0
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Errorf("two winners: %d and %d", winner, i)
			}
			winner = i
		case errors.Is(err, engine.ErrTokenUsed):
			used++
		default:
			t.Errorf("consume %d: %v", i, err)
		}
	}
	if winner < 0 || used != n-1 {
		t.Fatalf("winner %d, %d used; want 1 winner and %d ErrTokenUsed", winner, used, n-1)
	}
	by, err := tk.UsedBy(e.ctx, tok)
	if err != nil || by != fmt.Sprintf("r_%d", winner) {
		t.Errorf("used by %q (%v), want r_%d", by, err, winner)
	}
	if ttl := e.rdb.PTTL(e.ctx, e.st.b.k.tokenUsed(tok)).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("used key TTL %s", ttl)
	}
	if _, err := tk.Load(e.ctx, tok); err != nil {
		t.Errorf("a used token still loads: %v", err)
	}
	if err := tk.Discard(e.ctx, tok); !errors.Is(err, engine.ErrTokenUsed) {
		t.Errorf("discard used token: %v", err)
	}
}

func TestTokenDiscard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tk := e.st.Tokens()
	tok, err := tk.Save(e.ctx, engine.Frozen{DLQ: "q"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Discard(e.ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Load(e.ctx, tok); !errors.Is(err, engine.ErrTokenNotFound) {
		t.Errorf("load discarded: %v", err)
	}
	if err := tk.Discard(e.ctx, tok); !errors.Is(err, engine.ErrTokenNotFound) {
		t.Errorf("discard twice: %v", err)
	}
	if err := tk.Consume(e.ctx, tok, "r_1"); !errors.Is(err, engine.ErrTokenNotFound) {
		t.Errorf("consume discarded: %v", err)
	}
}
