package engine

import (
	"context"
	"time"
)

// Claim is who holds one message id of a DLQ: the replay that claimed it
// for the step it is sending, or that sent it.
type Claim struct {
	Replay string    `json:"replay_id"`
	Sent   bool      `json:"sent"` // sent (or maybe sent: in doubt), not only claimed
	At     time.Time `json:"at"`   // when it was claimed (until), sent or owned
	// Owned: the replay owns it since its approval (no other replay
	// owned it then) and has not sent nor claimed it yet; TakenOver: the
	// replay got it by a take-over (Params.TakeOver), whether it owns,
	// claimed or sent it now.
	Owned     bool `json:"owned,omitempty"`
	TakenOver bool `json:"taken_over,omitempty"`
}

// ClaimsBy is what one replay holds of a DLQ, summed up (Claims.Summary).
type ClaimsBy struct {
	Replay string
	// LastWrite is when the replay last claimed, owned or settled an id of
	// the DLQ; ClaimsUntil is when the latest claim it made runs out.
	LastWrite, ClaimsUntil time.Time
}

// Claims hands a DLQ's messages to one replay at a time, so that replays
// whose previews overlap send each message once in all. At approval a
// replay becomes the owner of its previewed ids that no other replay owns
// (Own): the first approved owns the overlap, unless a later approval
// takes it over explicitly. Before each step a
// run claims the ids it picked; an id another replay claimed (for its
// current step, until the claim expires) or sent since this replay was
// approved is refused with the replay that holds it. After the step the
// run marks what it sent (or may have sent) and releases the rest.
type Claims interface {
	// Claim claims ids of dlq for replay until ttl from now, atomically
	// for the whole batch: ids another replay holds (claimed, owned or
	// sent) are refused (and not claimed), the rest are claimed. An id sent by another replay before
	// since does not refuse (the approver saw it as already replayed).
	Claim(ctx context.Context, dlq, replay string, ids []string, since time.Time, ttl time.Duration) (refused map[string]Claim, err error)
	// Own makes replay, at its approval, the owner of those of ids that
	// no other replay owns: an id another replay is sending now (an
	// unexpired claim) or sent at or after since is refused; an id
	// another replay owns (and has not sent) is refused too, unless
	// takeOver, when replay takes it over (taken); what the replays in
	// lapsed (stopped or ended: State.Yields) own and have not sent is
	// taken over whatever takeOver says (taken too). Each id of refused
	// and taken maps to who held it before.
	Own(ctx context.Context, dlq, replay string, ids []string, since time.Time, takeOver bool, lapsed []string) (refused, taken map[string]Claim, err error)
	// Settle marks sent as sent by replay and releases replay's claims on
	// released (ids claimed and not sent): those stay replay's to send.
	Settle(ctx context.Context, dlq, replay string, sent, released []string) error
	// Holders returns, for those of ids that another replay than replay
	// holds now (claimed, owned or sent), who holds them.
	Holders(ctx context.Context, dlq, replay string, ids []string) (map[string]Claim, error)
	// Summary sums dlq's claims up per replay: every replay that claimed,
	// owned or settled any of its ids within the store's retention, when
	// it last did and until when its latest claim runs. known is false
	// when the store cannot tell (claims recorded before it kept the
	// summary): then only Holders can.
	Summary(ctx context.Context, dlq string) (by []ClaimsBy, known bool, err error)
	// Readers lists the replays other than replay with unexpired claims on
	// dlq (those sending from it now) or an unexpired reading mark (those
	// whose reads hold its messages now).
	Readers(ctx context.Context, dlq, replay string) ([]string, error)
	// Reading marks replay as reading dlq for ttl from now: seeking when its
	// step looks for picks it did not find, otherwise holding a cursor
	// open between steps (cursor.go), held messages of it when held > 0,
	// or a preview's, approval's or check's read (engine/review/readers.go). A later
	// mark replaces an earlier.
	Reading(ctx context.Context, dlq, replay string, seeking bool, held int, ttl time.Duration) error
	// Holding returns, per reader with an unexpired mark on dlq that said
	// how many messages it holds, that count.
	Holding(ctx context.Context, dlq string) (map[string]int, error)
	// DoneReading ends replay's reading mark on dlq.
	DoneReading(ctx context.Context, dlq, replay string) error
	// ReadSince lists the replays other than replay that had a reading
	// mark on dlq at any moment since: current then or later, lapsed or
	// ended since. A read that held messages and let them go between two
	// looks at the broker shows here, never in its counts.
	ReadSince(ctx context.Context, dlq, replay string, since time.Time) ([]string, error)
	// Seekers lists the replays other than replay with an unexpired
	// seeking mark on dlq: those whose steps wait for picks another read
	// may hold.
	Seekers(ctx context.Context, dlq, replay string) ([]string, error)
	// Cursors lists the replays other than replay with an unexpired
	// reading mark that is not seeking: those whose cursors hold messages
	// of dlq between steps.
	Cursors(ctx context.Context, dlq, replay string) ([]string, error)
}
