package engine

import (
	"fmt"
	"github.com/stroma/dlqbot/engine/letter"
	"math/rand"
	"strings"
	"testing"
	"time"
)

var arrivalsNow = time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)

func deadAt(t time.Time, group, source string) letter.Meta {
	return letter.Meta{LastDeath: t, FailureGroup: group, Source: source}
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestArrivalsSpanChosenFromData checks that the bucket width follows the
// span of the failure times (minutes for an hour, hours for days) and that
// every message lands in the bucket that holds its time, whatever order the
// times arrive in.
func TestArrivalsSpanChosenFromData(t *testing.T) {
	cases := []struct {
		name  string
		span  time.Duration
		width time.Duration
	}{
		{"ten minutes", 10 * time.Minute, time.Minute},
		{"two hours", 2 * time.Hour, 5 * time.Minute},
		{"ten hours", 10 * time.Hour, 30 * time.Minute},
		{"three days", 72 * time.Hour, 2 * time.Hour},
		{"three weeks", 21 * 24 * time.Hour, 12 * time.Hour},
		{"a year", 365 * 24 * time.Hour, 28 * 24 * time.Hour},
	}
	for _, c := range cases {
		for _, order := range []string{"oldest first", "newest first", "shuffled"} {
			t.Run(c.name+"/"+order, func(t *testing.T) {
				start := arrivalsNow.Add(-c.span - time.Hour)
				var times []time.Time
				for i := 0; i <= 200; i++ {
					times = append(times, start.Add(c.span*time.Duration(i)/200))
				}
				switch order {
				case "newest first":
					for i, j := 0, len(times)-1; i < j; i, j = i+1, j-1 {
						times[i], times[j] = times[j], times[i]
					}
				case "shuffled":
					rand.New(rand.NewSource(1)).Shuffle(len(times), func(i, j int) { times[i], times[j] = times[j], times[i] })
				}
				a := NewArrivals(arrivalsNow)
				for _, tm := range times {
					a.Add(deadAt(tm, "g", "q"))
				}
				v := a.View()
				if v.Bucket != c.width {
					t.Fatalf("bucket width %v, want %v", v.Bucket, c.width)
				}
				if len(v.Counts) > ArrivalBuckets || len(v.Counts) == 0 {
					t.Fatalf("%d buckets", len(v.Counts))
				}
				if sum(v.Counts) != len(times) || v.Messages != len(times) {
					t.Fatalf("counted %d in buckets, %d messages; want %d", sum(v.Counts), v.Messages, len(times))
				}
				// Every time falls in its own bucket.
				want := make([]int, len(v.Counts))
				for _, tm := range times {
					i := int(tm.Sub(v.Start) / v.Bucket)
					if i < 0 || i >= len(want) {
						t.Fatalf("time %v outside [%v, +%d×%v)", tm, v.Start, len(want), v.Bucket)
					}
					want[i]++
				}
				for i := range want {
					if want[i] != v.Counts[i] {
						t.Fatalf("bucket %d holds %d, want %d (counts %v)", i, v.Counts[i], want[i], v.Counts)
					}
				}
				if !v.First.Equal(start.Truncate(time.Second)) || !v.Last.Equal(start.Add(c.span).Truncate(time.Second)) {
					t.Fatalf("first %v last %v", v.First, v.Last)
				}
			})
		}
	}
}

// TestArrivalsRecentUndatedAndRows covers "still arriving" (relative to
// the injected now), messages without a failure time, per-group and
// per-source rows sharing the overall buckets, and the row cap.
func TestArrivalsRecentUndatedAndRows(t *testing.T) {
	a := NewArrivals(arrivalsNow)
	// A burst after a deploy two hours ago, for group "timeout".
	for i := 0; i < 50; i++ {
		a.Add(deadAt(arrivalsNow.Add(-2*time.Hour+time.Duration(i)*time.Second), "timeout", "orders"))
	}
	// A second group still arriving: the last one 4m59s ago, then one 5m01s ago.
	a.Add(deadAt(arrivalsNow.Add(-(5*time.Minute - time.Second)), "currency XTS", "payments"))
	a.Add(deadAt(arrivalsNow.Add(-(5*time.Minute + time.Second)), "currency XTS", "payments"))
	// Spring: no failure time.
	for i := 0; i < 3; i++ {
		a.Add(letter.Meta{FailureGroup: "currency XTS", Source: "payments"})
	}
	v := a.View()
	if v.Messages != 55 || v.Undated != 3 || sum(v.Counts) != 52 {
		t.Fatalf("messages %d undated %d drawn %d", v.Messages, v.Undated, sum(v.Counts))
	}
	if v.Recent != 1 || !v.StillArriving() {
		t.Fatalf("recent %d, want 1", v.Recent)
	}
	if len(v.Groups) != 2 || v.Groups[0].Key != "timeout" || v.Groups[1].Key != "currency XTS" {
		t.Fatalf("groups %+v", v.Groups)
	}
	g0, g1 := v.Groups[0], v.Groups[1]
	if g0.StillArriving() || !g1.StillArriving() || g1.Undated != 3 || g1.Messages != 5 {
		t.Fatalf("rows: %+v / %+v", g0, g1)
	}
	if g0.GroupID != GroupID("timeout") || !strings.HasPrefix(g0.GroupID, "g") || len(g0.GroupID) != 13 {
		t.Fatalf("group id %q", g0.GroupID)
	}
	if len(g0.Counts) != len(v.Counts) || len(v.Sources) != 2 || len(v.Sources[0].Counts) != len(v.Counts) {
		t.Fatal("rows do not share the overall buckets")
	}
	// The span reaches to now: the last bucket holds now.
	if end := v.Start.Add(time.Duration(len(v.Counts)) * v.Bucket); !end.After(arrivalsNow) || end.Add(-v.Bucket).After(arrivalsNow) {
		t.Fatalf("buckets end at %v, now is %v", end, arrivalsNow)
	}

	// Nothing recent: the newest 5m01s ago.
	b := NewArrivals(arrivalsNow)
	b.Add(deadAt(arrivalsNow.Add(-5*time.Minute-time.Second), "x", "q"))
	if v := b.View(); v.StillArriving() {
		t.Fatal("a failure 5m01s ago counts as still arriving")
	}
	// Only undated messages: no buckets, no times.
	c := NewArrivals(arrivalsNow)
	c.Add(letter.Meta{FailureGroup: "x"})
	if v := c.View(); v.Undated != 1 || len(v.Counts) != 0 || !v.First.IsZero() || !v.Start.IsZero() {
		t.Fatalf("undated only: %+v", v)
	}
	if NewArrivals(arrivalsNow).View() != nil {
		t.Fatal("no message: want nil arrivals")
	}

	// Many groups: at most ArrivalRows listed, the rest counted.
	d := NewArrivals(arrivalsNow)
	total := 0
	for g := 0; g < 200; g++ {
		for i := 0; i <= g%7; i++ {
			d.Add(deadAt(arrivalsNow.Add(-time.Duration(g)*time.Minute), "group "+strings.Repeat("x", g), "q"))
			total++
		}
	}
	v = d.View()
	listed := 0
	for _, r := range v.Groups {
		listed += r.Messages
	}
	if len(v.Groups) != ArrivalRows || listed+v.MoreGroups != total {
		t.Fatalf("%d rows, %d listed + %d more, want %d rows and %d", len(v.Groups), listed, v.MoreGroups, ArrivalRows, total)
	}
}

// TestArrivalsNonsenseTimes checks that absurd failure times (year 1, year
// 9999, the epoch) neither panic nor lose a message.
func TestArrivalsNonsenseTimes(t *testing.T) {
	a := NewArrivals(arrivalsNow)
	for _, tm := range []time.Time{time.Unix(0, 0), (time.Time{}).Add(time.Hour), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), arrivalsNow, time.Unix(1<<62, 0)} {
		a.Add(deadAt(tm, "g", "q"))
	}
	v := a.View()
	if sum(v.Counts) != 5 || len(v.Counts) > ArrivalBuckets {
		t.Fatalf("drawn %d in %d buckets", sum(v.Counts), len(v.Counts))
	}
}

// TestArrivalsMillion adds a million failures over a year in
// random order and checks the counts; the accumulator holds only
// fixed-size rows.
func TestArrivalsMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("1M adds")
	}
	a := NewArrivals(arrivalsNow)
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 1_000_000; i++ {
		a.Add(deadAt(arrivalsNow.Add(-time.Duration(r.Int63n(int64(365*24*time.Hour)))), "g"+string(rune('a'+i%5)), "q"))
	}
	v := a.View()
	if sum(v.Counts) != 1_000_000 || len(v.Groups) != 5 {
		t.Fatalf("drawn %d, %d groups", sum(v.Counts), len(v.Groups))
	}
}

func TestSelectionGroupAndReplayedBy(t *testing.T) {
	m := letter.Meta{FailureGroup: "order <n> not found", ReplayID: "r_1", Returned: true}
	for _, c := range []struct {
		sel  Selection
		want Verdict
	}{
		{Selection{Group: "order <n> not found"}, Selected},
		{Selection{Group: GroupID("order <n> not found")}, Selected},
		{Selection{Group: "order <n>"}, Excluded}, // exact, not a substring
		{Selection{Group: GroupID("other")}, Excluded},
		{Selection{ReplayedBy: "r_1"}, Selected},
		{Selection{ReplayedBy: "r_2"}, Excluded},
	} {
		if got := c.sel.Match(m); got != c.want {
			t.Errorf("%s: %v, want %v", c.sel.String(), got, c.want)
		}
	}
	waiting := m
	waiting.Returned = false // carries the id but has no new death
	if (Selection{ReplayedBy: "r_1"}).Match(waiting) != Excluded {
		t.Error("replayed_by selects a copy that did not come back")
	}
	s := Selection{DLQ: "orders.dlq", Group: "order <n> not found", ReplayedBy: "r_1"}
	if got := s.String(); got != `orders.dlq group="order <n> not found" replayed_by=r_1` {
		t.Errorf("String = %s", got)
	}
	if got := (Selection{DLQ: "d", Group: "gabc"}).String(); got != "d group=gabc" {
		t.Errorf("String = %s", got)
	}
}

// BenchmarkArrivalsAdd is the cost a preview's scan pays per selected
// message for its arrivals (times spread over a week, in random order, 20
// groups and 5 sources).
func BenchmarkArrivalsAdd(b *testing.B) {
	r := rand.New(rand.NewSource(3))
	ms := make([]letter.Meta, 4096)
	for i := range ms {
		ms[i] = deadAt(arrivalsNow.Add(-time.Duration(r.Int63n(int64(7*24*time.Hour)))), fmt.Sprintf("group %d", i%20), fmt.Sprintf("q%d", i%5))
	}
	a := NewArrivals(arrivalsNow)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.Add(ms[i%len(ms)])
	}
}

// BenchmarkMatchGroupID is the cost of group=<id> per scanned message (a
// SHA-256 of its failure group).
func BenchmarkMatchGroupID(b *testing.B) {
	s := Selection{Group: GroupID("java.lang.IllegalStateException: order <n> not found")}
	m := letter.Meta{FailureGroup: "java.lang.IllegalArgumentException: currency <id> is not supported for merchant <n>"}
	for i := 0; i < b.N; i++ {
		s.Match(m)
	}
}

// BenchmarkMatchNoGroup is Match without group=, the reference for
// BenchmarkMatchGroupID.
func BenchmarkMatchNoGroup(b *testing.B) {
	s := Selection{}
	m := letter.Meta{FailureGroup: "java.lang.IllegalArgumentException: currency <id> is not supported for merchant <n>"}
	for i := 0; i < b.N; i++ {
		s.Match(m)
	}
}
