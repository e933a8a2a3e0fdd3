package review

import (
	"encoding/hex"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
	"time"
)

// previewRow is one distinct matching message as a preview keeps it while
// it works: its fingerprint as 8 bytes, its copies, its first position and
// the index of its class (what the summary and the token need beyond that
// is shared by many messages). A 1,000,000-message preview keeps 1,000,000
// of these (32 bytes each) rather than full PreviewMessage rows.
type previewRow struct {
	id       [8]byte
	seq      int
	count    int32
	class    int32
	replayed bool // the ledger has sent it before (Ledger.History)
}

// rowClass is what many messages share: everything the target, the token's
// group and the summary's problems depend on.
type rowClass struct {
	source, sourceNote, exchange, routingKey string
	needsRoute                               bool
	badTarget                                bool // the headers named an invalid queue (Meta.BadTarget)
	reason                                   letter.Reason
	group                                    string
	again                                    bool // ReplayCount > 0
	unreadable                               bool // headers that could not be read
	refusal                                  string
	parked                                   bool
}

// previewRows are a preview's distinct matching messages in DLQ order,
// compact: the first listed of them also have a full PreviewMessage
// (Preview.Messages[i] is row i).
type previewRows struct {
	rows    []previewRow
	byID    map[[8]byte]int32
	odd     map[string]int32 // ids that are not 16 hex digits (none today)
	oddID   map[int32]string
	classes []rowClass
	classOf map[rowClass]int32
	// target and note are per class, set by resolveTargets: the queue the
	// class goes back to ("" when none) and, when the route could not be
	// resolved, why (else "": the meta's own note stands).
	target, note []string
	// lastDeath is per class: the latest failure time of its messages
	// (zero when none carries one).
	lastDeath []time.Time
}

func newPreviewRows() *previewRows {
	return &previewRows{byID: map[[8]byte]int32{}, classOf: map[rowClass]int32{}}
}

// add counts one copy of meta and reports its row and whether it is new.
// Copies of a row after the first keep the first's verdict, like before.
func (r *previewRows) Add(meta letter.Meta, parked bool) (int, bool) {
	var key [8]byte
	packed := len(meta.ID) == 16
	if packed {
		_, err := hex.Decode(key[:], []byte(meta.ID))
		packed = err == nil && hex.EncodeToString(key[:]) == meta.ID
	}
	if packed {
		if i, ok := r.byID[key]; ok {
			r.rows[i].count++
			return int(i), false
		}
	} else if i, ok := r.odd[meta.ID]; ok {
		r.rows[i].count++
		return int(i), false
	}
	i := int32(len(r.rows))
	if packed {
		r.byID[key] = i
	} else {
		if r.odd == nil {
			r.odd, r.oddID = map[string]int32{}, map[int32]string{}
		}
		r.odd[meta.ID], r.oddID[i] = i, meta.ID
	}
	c := rowClass{source: meta.Source, sourceNote: meta.SourceNote, exchange: meta.Exchange, needsRoute: meta.NeedsRoute,
		badTarget: meta.BadTarget != "", reason: meta.Reason, group: meta.FailureGroup, again: meta.ReplayCount > 0, unreadable: len(meta.Problems) > 0,
		refusal: meta.Refusal, parked: parked}
	if len(meta.RoutingKeys) > 0 {
		c.routingKey = meta.RoutingKeys[0]
	}
	ci, ok := r.classOf[c]
	if !ok {
		ci = int32(len(r.classes))
		r.classes = append(r.classes, c)
		r.classOf[c] = ci
		r.lastDeath = append(r.lastDeath, time.Time{})
	}
	if t := engine.LatestDeath(meta); t.After(r.lastDeath[ci]) {
		r.lastDeath[ci] = t
	}
	r.rows = append(r.rows, previewRow{id: key, seq: meta.Seq, count: 1, class: ci})
	return int(i), true
}

// scanned drops what only the scan needs (the id index).
func (r *previewRows) scanned() {
	r.byID, r.odd, r.classOf = nil, nil, nil
}

// id returns row i's fingerprint as text.
func (r *previewRows) id(i int) string {
	if s, ok := r.oddID[int32(i)]; ok {
		return s
	}
	return hex.EncodeToString(r.rows[i].id[:])
}

// targetOf returns row i's target, "" when it has none or is parked.
func (r *previewRows) targetOf(i int) string {
	c := r.rows[i].class
	if r.classes[c].parked {
		return ""
	}
	return r.target[c]
}
