package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"github.com/stroma/dlqbot/engine/letter"
	"sort"
	"time"
)

// Arrivals over time: when the selected messages were
// dead-lettered, as a histogram computed during the scan in O(buckets)
// memory — times are never kept per message.
const (
	// ArrivalsRecent is the window that makes failures "still arriving":
	// a selected message dead-lettered this long before the preview (or
	// later) is recent, relative to the engine's Clock.
	ArrivalsRecent = 5 * time.Minute
	// ArrivalBuckets is the most buckets a histogram holds: the span is
	// drawn with one bucket width chosen so that it fits.
	ArrivalBuckets = 48
	// ArrivalRows is the most failure groups (and source queues) a
	// preview lists with their own histogram, largest first.
	ArrivalRows = 20
	// arrivalTracked is the most groups (and sources) followed during a
	// scan; messages of groups first seen after that are counted together.
	arrivalTracked = 64
	// maxArrivalSec bounds the failure times counted (about the year
	// 36,800); earlier than 1970 counts as 1970.
	maxArrivalSec = 1 << 40
)

// arrivalWidths are the bucket widths, each a multiple of the one before
// (so buckets merge exactly when the span grows); beyond the last the
// width keeps growing fourfold.
var arrivalWidths = []int64{60, 5 * 60, 10 * 60, 30 * 60, 3600, 2 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400, 28 * 86400}

func arrivalWidth(level int) int64 {
	if level < len(arrivalWidths) {
		return arrivalWidths[level]
	}
	w := arrivalWidths[len(arrivalWidths)-1]
	for i := len(arrivalWidths) - 1; i < level && w < 1<<50; i++ {
		w *= 4
	}
	return w
}

// Arrivals is when a preview's selected messages were dead-lettered: a
// histogram over [Start, Start+len(Counts)×Bucket), overall and per failure
// group and per source queue. Messages without a failure time (Spring's
// recoverer records none) are counted in Undated, never drawn.
type Arrivals struct {
	// Start is the start of the first bucket; Bucket is every bucket's
	// width. The buckets run from the earliest failure to the latest, or
	// to now when that fits in ArrivalBuckets.
	Start  time.Time     `json:"start,omitzero"`
	Bucket time.Duration `json:"bucket_ns"`
	// Now is the time the preview was made (Recent is relative to it).
	Now time.Time `json:"now"`
	// RecentWindow is ArrivalsRecent.
	RecentWindow time.Duration `json:"recent_window_ns"`
	ArrivalRow
	// Groups are the largest failure groups (at most ArrivalRows), Sources
	// the largest source queues; MoreGroups and MoreSources count the
	// messages of the rest.
	Groups      []ArrivalRow `json:"groups"`
	MoreGroups  int          `json:"more_groups_messages,omitempty"`
	Sources     []ArrivalRow `json:"sources"`
	MoreSources int          `json:"more_sources_messages,omitempty"`
}

// ArrivalRow is the arrivals of one failure group, one source queue, or
// all selected messages.
type ArrivalRow struct {
	// Key is the failure group or the source queue ("" for all, and for
	// messages without a source).
	Key string `json:"key,omitempty"`
	// GroupID is the short id of a failure group: the selection
	// group=<GroupID> picks exactly its messages (see GroupID).
	GroupID string `json:"group_id,omitempty"`
	// Type is a failure group's exception type or, without one, its
	// dead-letter reason (see FailureType): what a channel is shown of
	// the group instead of Key.
	Type     string `json:"type,omitempty"`
	Messages int    `json:"messages"`
	// Undated counts messages without a failure time.
	Undated int `json:"undated"`
	// First and Last are the earliest and latest failure times (zero when
	// every message is undated).
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
	// Recent counts messages dead-lettered within RecentWindow of Now.
	Recent int `json:"recent"`
	// Counts are the messages per bucket (see Arrivals.Start).
	Counts []int `json:"counts"`
}

// StillArriving reports whether any of the row's messages was
// dead-lettered within the recent window.
func (r ArrivalRow) StillArriving() bool { return r.Recent > 0 }

// GroupID is a failure group's short id ("g" and 12 hex digits of its
// SHA-256): the selection filter group= accepts it as well as the group's
// full text, and it fits in a Slack button.
func GroupID(group string) string {
	sum := sha256.Sum256([]byte(group))
	return "g" + hex.EncodeToString(sum[:6])
}

// inGroup reports whether failure group g is want: the same text, or
// want is g's GroupID. It hashes g only when want has an id's form.
func inGroup(g, want string) bool {
	if g == want {
		return true
	}
	if len(want) != 13 || want[0] != 'g' {
		return false
	}
	var id [6]byte
	if _, err := hex.Decode(id[:], []byte(want[1:])); err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(g))
	return [6]byte(sum[:6]) == id
}

// arrivalCounter is one row while scanning.
type arrivalCounter struct {
	key, typ    string
	n, undated  int
	recent      int
	first, last int64 // unix seconds; valid when n > undated
	h           [ArrivalBuckets]int
}

// arrivals accumulates a scan's failure times into histograms that share
// one bucket width and window: when a time falls outside the window, the
// window moves or, when the span no longer fits, the width grows to the
// next in arrivalWidths and the buckets merge. Both happen a bounded number
// of times, so adding a message is O(1) amortised and memory is
// O(ArrivalBuckets × rows).
type ArrivalHistogram struct {
	now, recentFrom int64
	level           int
	base            int64 // bucket index of h[0]
	lo, hi          int64 // earliest and latest bucket seen
	dated           bool
	all             arrivalCounter
	groups, sources rowSet
}

// rowSet is up to arrivalTracked rows by key, the rest counted in other.
type rowSet struct {
	byKey map[string]*arrivalCounter
	other arrivalCounter
}

func (s *rowSet) row(key string) *arrivalCounter {
	if r, ok := s.byKey[key]; ok {
		return r
	}
	if s.byKey == nil {
		s.byKey = map[string]*arrivalCounter{}
	}
	if len(s.byKey) >= arrivalTracked {
		return &s.other
	}
	r := &arrivalCounter{key: key}
	s.byKey[key] = r
	return r
}

func (s *rowSet) each(fn func(*arrivalCounter)) {
	for _, r := range s.byKey {
		fn(r)
	}
	fn(&s.other)
}

func NewArrivals(now time.Time) *ArrivalHistogram {
	return &ArrivalHistogram{now: now.Unix(), recentFrom: now.Add(-ArrivalsRecent).Unix()}
}

// add counts one selected message.
func (a *ArrivalHistogram) Add(m letter.Meta) {
	g := a.groups.row(m.FailureGroup)
	if g.typ == "" && g != &a.groups.other {
		g.typ = letter.FailureType(m.ExceptionType, m.Exception, m.Reason)
	}
	rows := [3]*arrivalCounter{&a.all, g, a.sources.row(m.Source)}
	t := m.LastDeath
	if t.IsZero() {
		t = m.FirstDeath
	}
	if t.IsZero() {
		for _, r := range rows {
			r.n++
			r.undated++
		}
		return
	}
	sec := min(max(t.Unix(), 0), maxArrivalSec) // a nonsense time cannot stretch the span without bound
	k := floorDiv(sec, arrivalWidth(a.level))
	if !a.fits(k) {
		k = floorDiv(sec, arrivalWidth(a.level))
	}
	for _, r := range rows {
		if r.n == r.undated || sec < r.first {
			r.first = sec
		}
		if r.n == r.undated || sec > r.last {
			r.last = sec
		}
		r.n++
		if sec >= a.recentFrom {
			r.recent++
		}
		r.h[k-a.base]++
	}
}

// fits makes the window hold bucket k, moving it or widening the buckets;
// it reports whether the width stayed the same.
func (a *ArrivalHistogram) fits(k int64) bool {
	if !a.dated {
		a.dated, a.lo, a.hi, a.base = true, k, k, k
		return true
	}
	if k >= a.base && k < a.base+ArrivalBuckets {
		a.lo, a.hi = min(a.lo, k), max(a.hi, k)
		return true
	}
	below := k < a.base
	lo, hi, level := min(a.lo, k), max(a.hi, k), a.level
	var ratio int64 = 1
	for hi-lo >= ArrivalBuckets {
		r := arrivalWidth(level+1) / arrivalWidth(level)
		level++
		ratio *= r
		lo, hi = floorDiv(lo, r), floorDiv(hi, r)
	}
	base := lo
	if below {
		base = hi - ArrivalBuckets + 1 // room below: times often arrive newest last
	}
	remap := func(r *arrivalCounter) {
		var h [ArrivalBuckets]int
		for i, c := range r.h {
			if c != 0 {
				h[floorDiv(a.base+int64(i), ratio)-base] += c
			}
		}
		r.h = h
	}
	remap(&a.all)
	a.groups.each(remap)
	a.sources.each(remap)
	same := level == a.level
	a.level, a.base, a.lo, a.hi = level, base, lo, hi
	return same
}

// view turns the accumulated counts into the preview's Arrivals; nil when
// nothing was selected.
func (a *ArrivalHistogram) View() *Arrivals {
	if a.all.n == 0 {
		return nil
	}
	w := arrivalWidth(a.level)
	v := &Arrivals{Now: time.Unix(a.now, 0).UTC(), RecentWindow: ArrivalsRecent, Bucket: time.Duration(w) * time.Second}
	from, to := a.lo, a.hi
	if nowK := floorDiv(a.now, w); nowK > to && nowK-from < ArrivalBuckets {
		to = nowK
	}
	if a.dated {
		v.Start = time.Unix(from*w, 0).UTC()
	}
	row := func(c *arrivalCounter) ArrivalRow {
		r := ArrivalRow{Key: c.key, Type: c.typ, Messages: c.n, Undated: c.undated, Recent: c.recent, Counts: []int{}}
		if c.n > c.undated {
			r.First, r.Last = time.Unix(c.first, 0).UTC(), time.Unix(c.last, 0).UTC()
		}
		if a.dated {
			r.Counts = make([]int, to-from+1)
			for k := from; k <= to; k++ {
				if i := k - a.base; i >= 0 && i < ArrivalBuckets {
					r.Counts[k-from] = c.h[i]
				}
			}
		}
		return r
	}
	v.ArrivalRow = row(&a.all)
	v.Groups, v.MoreGroups = a.rows(&a.groups, row, true)
	v.Sources, v.MoreSources = a.rows(&a.sources, row, false)
	return v
}

// rows lists the largest rows of s (at most ArrivalRows) and counts the
// messages of the rest.
func (a *ArrivalHistogram) rows(s *rowSet, row func(*arrivalCounter) ArrivalRow, groups bool) ([]ArrivalRow, int) {
	cs := make([]*arrivalCounter, 0, len(s.byKey))
	for _, c := range s.byKey {
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].n != cs[j].n {
			return cs[i].n > cs[j].n
		}
		return cs[i].key < cs[j].key
	})
	more := s.other.n
	out := make([]ArrivalRow, 0, min(len(cs), ArrivalRows))
	for i, c := range cs {
		if i >= ArrivalRows {
			more += c.n
			continue
		}
		r := row(c)
		if groups {
			r.GroupID = GroupID(c.key)
		}
		out = append(out, r)
	}
	return out, more
}

// floorDiv is a / b rounded down (times before 1970 are negative).
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
