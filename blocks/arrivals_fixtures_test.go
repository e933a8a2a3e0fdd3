package blocks

import (
	"time"

	"github.com/stroma/dlqbot/engine"
)

// arrivalRow builds a row over the fixture's 24 buckets of 5 minutes.
func arrivalRow(key string, counts []int, undated, recent int, first, last time.Time) engine.ArrivalRow {
	n := undated
	for _, c := range counts {
		n += c
	}
	r := engine.ArrivalRow{Key: key, Messages: n, Undated: undated, Recent: recent, First: first, Last: last, Counts: counts}
	return r
}

// previewArrivals is a preview of a DLQ fed by a deploy: a burst of
// "order not found" two hours ago, and "currency XTS" failures still
// arriving, three of them from Spring without a failure time.
func previewArrivals() *engine.Preview {
	p := previewWithProblems()
	p.Problems = p.Problems[:1]
	now := fixedNow()
	start := now.Truncate(5 * time.Minute).Add(-23 * 5 * time.Minute)
	burst := []int{0, 0, 0, 2, 19, 14, 6, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	still := []int{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 1, 0, 1, 2, 0, 3, 1, 2, 0, 2, 1, 2}
	all := make([]int, len(burst))
	for i := range all {
		all[i] = burst[i] + still[i]
	}
	notFound := arrivalRow("order <n> not found", burst, 0, 0, start.Add(15*time.Minute+7*time.Second), start.Add(40*time.Minute+31*time.Second))
	notFound.GroupID, notFound.Type = engine.GroupID(notFound.Key), "rejected"
	xts := arrivalRow("java.lang.IllegalArgumentException: currency XTS not supported for customer John Roe, email john.roe@example.com", still, 3, 3, start.Add(45*time.Minute), now.Add(-40*time.Second))
	xts.GroupID, xts.Type = engine.GroupID(xts.Key), "java.lang.IllegalArgumentException"
	total := arrivalRow("", all, 3, 3, notFound.First, xts.Last)
	p.Arrivals = &engine.Arrivals{
		Start: start, Bucket: 5 * time.Minute, Now: now, RecentWindow: engine.ArrivalsRecent, ArrivalRow: total,
		Groups:  []engine.ArrivalRow{notFound, xts},
		Sources: []engine.ArrivalRow{arrivalRow("orders.created", all, 3, 3, notFound.First, xts.Last)},
	}
	return p
}

// previewArrivalsBySource has one failure group from two source queues,
// none in the last minutes, spread over days.
func previewArrivalsBySource() *engine.Preview {
	p := previewNothing()
	now := fixedNow()
	start := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	a := []int{1, 0, 0, 4, 9, 2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	b := []int{0, 0, 0, 0, 0, 0, 0, 0, 7, 7, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	all := make([]int, len(a))
	for i := range all {
		all[i] = a[i] + b[i]
	}
	p.Arrivals = &engine.Arrivals{
		Start: start, Bucket: 6 * time.Hour, Now: now, RecentWindow: engine.ArrivalsRecent,
		ArrivalRow: arrivalRow("", all, 0, 0, start.Add(time.Hour), start.Add(62*time.Hour)),
		Groups:     []engine.ArrivalRow{arrivalRow("rejected", all, 0, 0, start.Add(time.Hour), start.Add(62*time.Hour))},
		Sources: []engine.ArrivalRow{
			arrivalRow("orders.created", a, 0, 0, start.Add(time.Hour), start.Add(62*time.Hour)),
			arrivalRow("orders.shipped", b, 0, 0, start.Add(49*time.Hour), start.Add(61*time.Hour)),
		},
	}
	return p
}
