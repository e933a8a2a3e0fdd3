package store

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

func TestClaimsOneReplayAtATime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.st.Claims()
	since := e.clock.Now()
	refused, err := c.Claim(e.ctx, "orders.dlq", "r_a", []string{"x", "y"}, since, time.Minute)
	if err != nil || len(refused) != 0 {
		t.Fatalf("first claim: %v, refused %v", err, refused)
	}
	// Another replay is refused what r_a claimed, and gets the rest.
	refused, err = c.Claim(e.ctx, "orders.dlq", "r_b", []string{"y", "z"}, since, time.Minute)
	if err != nil || len(refused) != 1 || refused["y"].Replay != "r_a" || refused["y"].Sent {
		t.Fatalf("overlapping claim: %v, refused %+v; want y held by r_a", err, refused)
	}
	if rs, err := c.Readers(e.ctx, "orders.dlq", "r_b"); err != nil || !slices.Equal(rs, []string{"r_a"}) {
		t.Fatalf("readers seen by r_b: %v %v", rs, err)
	}
	// r_a sends x and releases y: x stays r_a's (sent), y stays r_a's to
	// send (owned).
	e.clock.Advance(time.Second)
	if err := c.Settle(e.ctx, "orders.dlq", "r_a", []string{"x"}, []string{"y"}); err != nil {
		t.Fatal(err)
	}
	refused, err = c.Claim(e.ctx, "orders.dlq", "r_b", []string{"x", "y"}, since, time.Minute)
	if err != nil || len(refused) != 2 || !refused["x"].Sent || refused["x"].Replay != "r_a" || !refused["y"].Owned || refused["y"].Replay != "r_a" {
		t.Fatalf("after r_a's step: %v, refused %+v; want x sent by r_a, y owned by it", err, refused)
	}
	if rs, err := c.Readers(e.ctx, "orders.dlq", "r_b"); err != nil || len(rs) != 0 {
		t.Fatalf("readers after r_a's step: %v %v; want none (owning is not reading)", rs, err)
	}
	// A send before since (the approver saw it as replayed) does not refuse.
	if refused, err = c.Claim(e.ctx, "orders.dlq", "r_c", []string{"x"}, e.clock.Now().Add(time.Second), time.Minute); err != nil || len(refused) != 0 {
		t.Fatalf("claim after the send: %v, refused %+v", err, refused)
	}
	// r_c's claim expires; then r_d may claim x.
	e.clock.Advance(2 * time.Minute)
	if refused, err = c.Claim(e.ctx, "orders.dlq", "r_d", []string{"x"}, e.clock.Now(), time.Minute); err != nil || len(refused) != 0 {
		t.Fatalf("claim after expiry: %v, refused %+v", err, refused)
	}
	h, err := c.Holders(e.ctx, "orders.dlq", "r_b", []string{"x", "y", "w"})
	if err != nil || h["x"].Replay != "r_d" || h["y"].Replay != "r_a" || !h["y"].Owned || len(h) != 2 {
		t.Fatalf("holders: %v %+v", err, h)
	}
	if err := c.Settle(e.ctx, "orders.dlq", "r_a", nil, []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if h, _ := c.Holders(e.ctx, "orders.dlq", "", []string{"x"}); h["x"].Replay != "r_d" {
		t.Fatalf("a release by r_a removed r_d's claim: %+v", h)
	}
}

// TestClaimsConcurrent has many replays claim overlapping ids at once:
// each id is granted to exactly one.
func TestClaimsConcurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.st.Claims()
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = fmt.Sprintf("m-%d", i)
	}
	var mu sync.Mutex
	granted := map[string]int{}
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refused, err := c.Claim(e.ctx, "q.dlq", fmt.Sprintf("r_%d", r), ids, e.clock.Now(), time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if _, no := refused[id]; !no {
					granted[id]++
				}
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if granted[id] != 1 {
			t.Errorf("%s granted to %d replays", id, granted[id])
		}
	}
}

// TestClaimsOwn: the first approval owns the overlap; a later one is
// refused it (or takes it over, explicitly); what another replay is
// sending now or sent since the preview is never taken over; what a
// replay that stopped or ended owns is taken over, named as such.
func TestClaimsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.st.Claims()
	since := e.clock.Now()
	refused, taken, err := c.Own(e.ctx, "o.dlq", "r_a", []string{"a", "b", "c", "d"}, since, false, nil)
	if err != nil || len(refused)+len(taken) != 0 {
		t.Fatalf("first owner: %v %+v %+v", err, refused, taken)
	}
	// r_a sends a and is sending b now.
	e.clock.Advance(time.Second)
	if refused, err := c.Claim(e.ctx, "o.dlq", "r_a", []string{"a", "b"}, since, time.Minute); err != nil || len(refused) != 0 {
		t.Fatalf("owner's claim: %v %+v", err, refused)
	}
	if err := c.Settle(e.ctx, "o.dlq", "r_a", []string{"a"}, nil); err != nil {
		t.Fatal(err)
	}
	refused, taken, err = c.Own(e.ctx, "o.dlq", "r_b", []string{"a", "b", "c", "e"}, since, false, nil)
	if err != nil || len(taken) != 0 || len(refused) != 3 || !refused["a"].Sent || refused["b"].Sent || refused["b"].Owned || !refused["c"].Owned || refused["c"].Replay != "r_a" {
		t.Fatalf("second owner: %v refused %+v taken %+v", err, refused, taken)
	}
	// A take-over takes c and d, never a (sent) nor b (being sent).
	refused, taken, err = c.Own(e.ctx, "o.dlq", "r_c", []string{"a", "b", "c", "d"}, since, true, nil)
	if err != nil || len(refused) != 2 || len(taken) != 2 || taken["c"].Replay != "r_a" || taken["d"].Replay != "r_a" {
		t.Fatalf("take-over: %v refused %+v taken %+v", err, refused, taken)
	}
	// r_a's next claim is refused d: taken over by r_c.
	if refused, err := c.Claim(e.ctx, "o.dlq", "r_a", []string{"d"}, since, time.Minute); err != nil || !refused["d"].TakenOver || refused["d"].Replay != "r_c" {
		t.Fatalf("taken-over claim: %v %+v", err, refused)
	}
	// r_b stopped or ended: r_d takes e over without a take-over, and
	// says from whom; the mark names the take-over for r_b.
	refused, taken, err = c.Own(e.ctx, "o.dlq", "r_d", []string{"e"}, since, false, []string{"r_b"})
	if err != nil || len(refused) != 0 || len(taken) != 1 || taken["e"].Replay != "r_b" {
		t.Fatalf("lapsed owner: %v %+v %+v", err, refused, taken)
	}
	if h, _ := c.Holders(e.ctx, "o.dlq", "", []string{"e"}); h["e"].Replay != "r_d" || !h["e"].Owned || !h["e"].TakenOver {
		t.Fatalf("e after r_b lapsed: %+v", h)
	}
}

// TestClaimsTakeOverStaysNamed: an id taken over keeps that mark through
// the new owner's claim and send, so the replay it was taken from can say
// so; a release gives it back to the new owner.
func TestClaimsTakeOverStaysNamed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.st.Claims()
	since := e.clock.Now()
	if _, _, err := c.Own(e.ctx, "t.dlq", "r_a", []string{"x", "y"}, since, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, taken, err := c.Own(e.ctx, "t.dlq", "r_b", []string{"x", "y"}, since, true, nil); err != nil || len(taken) != 2 {
		t.Fatalf("take-over: %v %+v", err, taken)
	}
	if refused, err := c.Claim(e.ctx, "t.dlq", "r_b", []string{"x", "y"}, since, time.Minute); err != nil || len(refused) != 0 {
		t.Fatalf("new owner's claim: %v %+v", err, refused)
	}
	if rs, _ := c.Readers(e.ctx, "t.dlq", "r_a"); !slices.Equal(rs, []string{"r_b"}) {
		t.Fatalf("readers: %v, want r_b", rs)
	}
	e.clock.Advance(time.Second)
	if err := c.Settle(e.ctx, "t.dlq", "r_b", []string{"x"}, []string{"y"}); err != nil {
		t.Fatal(err)
	}
	refused, err := c.Claim(e.ctx, "t.dlq", "r_a", []string{"x", "y"}, since, time.Minute)
	if err != nil || !refused["x"].Sent || !refused["x"].TakenOver || !refused["y"].Owned || !refused["y"].TakenOver || refused["y"].Replay != "r_b" {
		t.Fatalf("old owner's claim: %v %+v; want x sent and y owned by r_b, both taken over", err, refused)
	}
}

// TestClaimsSummary: every script keeps the DLQ's summary per replay (last
// write, latest claim expiry), entries past the retention are dropped,
// and a hash without a summary (written before it existed) is not known.
func TestClaimsSummary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.st.Claims()
	dlq := "sum.dlq"
	if by, known, err := c.Summary(e.ctx, dlq); err != nil || !known || len(by) != 0 {
		t.Fatalf("summary of an untouched DLQ: %v, known %v, %+v; want known and empty", err, known, by)
	}
	t0 := e.clock.Now()
	if _, _, err := c.Own(e.ctx, dlq, "r_a", []string{"x", "y"}, t0, false, nil); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	if _, err := c.Claim(e.ctx, dlq, "r_b", []string{"z"}, t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	if err := c.Settle(e.ctx, dlq, "r_b", []string{"z"}, nil); err != nil {
		t.Fatal(err)
	}
	by, known, err := c.Summary(e.ctx, dlq)
	if err != nil || !known || len(by) != 2 {
		t.Fatalf("summary: %v, known %v, %+v; want r_a and r_b", err, known, by)
	}
	got := map[string]engine.ClaimsBy{}
	for _, b := range by {
		got[b.Replay] = b
	}
	if a := got["r_a"]; !a.LastWrite.Equal(t0.Truncate(time.Millisecond)) || !a.ClaimsUntil.Equal(a.LastWrite) {
		t.Errorf("r_a: %+v, want its ownership at %v and no claim", a, t0)
	}
	if b := got["r_b"]; !b.LastWrite.Equal(t0.Add(2*time.Second).Truncate(time.Millisecond)) || !b.ClaimsUntil.Equal(t0.Add(time.Second+time.Minute).Truncate(time.Millisecond)) {
		t.Errorf("r_b: %+v, want its settle at t0+2s and its claim until t0+1m1s", b)
	}
	// Past the retention, r_a's entry goes at the next write.
	e.clock.Advance(31 * 24 * time.Hour)
	if _, err := c.Claim(e.ctx, dlq, "r_c", []string{"w"}, t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	by, _, _ = c.Summary(e.ctx, dlq)
	if len(by) != 1 || by[0].Replay != "r_c" {
		t.Errorf("summary after the retention: %+v, want r_c only", by)
	}
	// A hash with claims but no summary: not known.
	if err := e.st.b.rdb.HSet(e.ctx, e.st.b.k.claims("old.dlq"), "x", "r_old|o|1").Err(); err != nil {
		t.Fatal(err)
	}
	if _, known, err := c.Summary(e.ctx, "old.dlq"); err != nil || known {
		t.Errorf("summary of a hash from before it: known %v, %v; want not known", known, err)
	}
}

// TestReadersWalksAClaimsHashOfManyPages: Readers pages through the
// claims hash (HSCAN, readersPage fields at a time) and still finds every
// reader: r_a has sent 25,000 messages (not a reader), r_b holds one
// unexpired claim and r_c one that has expired, wherever HSCAN puts them.
func TestReadersWalksAClaimsHashOfManyPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.st.Claims()
	const dlq, n = "big.dlq", 25000
	since := e.clock.Now()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%06d", i)
	}
	if refused, err := c.Claim(e.ctx, dlq, "r_a", ids, since, time.Minute); err != nil || len(refused) != 0 {
		t.Fatalf("r_a's claim: %v, refused %d", err, len(refused))
	}
	if err := c.Settle(e.ctx, dlq, "r_a", ids, nil); err != nil {
		t.Fatal(err)
	}
	if refused, err := c.Claim(e.ctx, dlq, "r_c", []string{"c1"}, since, time.Second); err != nil || len(refused) != 0 {
		t.Fatalf("r_c's claim: %v, refused %v", err, refused)
	}
	e.clock.Advance(2 * time.Second) // r_c's claim expires
	if refused, err := c.Claim(e.ctx, dlq, "r_b", []string{"b1"}, since, time.Minute); err != nil || len(refused) != 0 {
		t.Fatalf("r_b's claim: %v, refused %v", err, refused)
	}
	if n <= 2*readersPage {
		t.Fatalf("the hash's %d fields fit in two pages of %d", n, readersPage)
	}
	if rs, err := c.Readers(e.ctx, dlq, "r_z"); err != nil || !slices.Equal(rs, []string{"r_b"}) {
		t.Fatalf("readers: %v %v; want r_b only", rs, err)
	}
	if rs, err := c.Readers(e.ctx, dlq, "r_b"); err != nil || len(rs) != 0 {
		t.Fatalf("readers seen by r_b: %v %v; want none", rs, err)
	}
}
