package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Kinds of break in the audit chain (AuditBreak.Kind).
const (
	AuditEdited   = "edited"   // the entry does not match its hash
	AuditDeleted  = "deleted"  // entries before this one are missing
	AuditInserted = "inserted" // this entry was added between two others
)

// AuditBreak is the first place the audit chain does not hold.
type AuditBreak struct {
	ID     string // the entry where the chain breaks
	Kind   string // AuditEdited, AuditDeleted or AuditInserted
	Detail string // a sentence saying what was found
}

// AuditVerification is what Verify found.
type AuditVerification struct {
	Entries   int         // entries read
	Unchained int         // entries from before the chain (no hash), at its start
	Anchor    string      // the id of the last entry trimmed ("" when none)
	Break     *AuditBreak // the first break; nil when the chain is intact
}

// Verify walks the whole audit chain from its anchor and reports the
// first break: an entry whose hash does not match its contents (edited,
// or forged without the signing key), an entry that does not chain to
// the one before it (one deleted), or an entry the next one skips
// (inserted). It needs the key the trail was written with. Entries from
// before the chain (without a hash) are accepted at the trail's start
// only.
func (a *Audit) Verify(ctx context.Context) (AuditVerification, error) {
	var v AuditVerification
	anchorID, anchorHash, err := a.anchor(ctx)
	if err != nil {
		return v, fail(err, "verify audit")
	}
	v.Anchor = anchorID
	var (
		chained        bool
		prevID         string
		prev, prevPrev string
	)
	start := "-"
	const batch = 500
	for {
		msgs, err := a.b.rdb.XRangeN(ctx, a.b.k.audit(), start, "+", batch).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return v, fail(err, "verify audit")
		}
		for _, m := range msgs {
			v.Entries++
			e, _ := m.Values["e"].(string)
			p, hasP := m.Values["p"].(string)
			h, hasH := m.Values["h"].(string)
			if !hasH || !hasP {
				if !chained {
					v.Unchained++
					continue
				}
				v.Break = &AuditBreak{ID: m.ID, Kind: AuditInserted,
					Detail: "it carries no chain hash, after the chain began: it was added outside dlqbot"}
				return v, nil
			}
			if !hmacEqualHex(h, a.b.auditHash(p, []byte(e))) {
				v.Break = &AuditBreak{ID: m.ID, Kind: AuditEdited,
					Detail: "its contents do not match its hash: it was changed in Redis, forged without the signing key, or written with another key"}
				return v, nil
			}
			switch {
			case chained && p == prev:
			case chained && p == prevPrev && prevPrev != "":
				v.Break = &AuditBreak{ID: prevID, Kind: AuditInserted,
					Detail: fmt.Sprintf("the entry after it (%s) chains to the one before it: it was inserted", m.ID)}
				return v, nil
			case chained:
				v.Break = &AuditBreak{ID: m.ID, Kind: AuditDeleted,
					Detail: fmt.Sprintf("it does not chain to the entry before it (%s): entries between them were deleted", prevID)}
				return v, nil
			case p != anchorHash:
				what := "the trail's start"
				if anchorID != "" {
					what = "the last trimmed entry (" + anchorID + ")"
				}
				v.Break = &AuditBreak{ID: m.ID, Kind: AuditDeleted,
					Detail: "it is the first entry but does not chain to " + what + ": entries before it were deleted"}
				return v, nil
			}
			chained, prevID, prevPrev, prev = true, m.ID, prev, h
		}
		if len(msgs) < batch {
			return v, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}
