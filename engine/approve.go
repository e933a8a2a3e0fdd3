package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ErrChanged means the world changed since the preview; the approval must
// be confirmed again (Changes says what changed).
var ErrChanged = errors.New("the DLQ or its targets changed since the preview")

// Change is one difference between a preview and the world now.
type Change struct {
	Kind     ChangeKind `json:"kind"`
	Queue    string     `json:"queue,omitempty"`
	Messages int        `json:"messages"`
	// Replay names the other replay holding the messages (held_by_replay).
	Replay string `json:"replay_id,omitempty"`
	// Owned (held_by_replay): Replay owns them (approved first, not sent
	// yet) rather than sending them now; TakeOver: this approval takes
	// them over.
	Owned    bool   `json:"owned,omitempty"`
	TakeOver bool   `json:"take_over,omitempty"`
	Detail   string `json:"detail"`
}

// Approval is the outcome of approving a preview token.
type Approval struct {
	Replay  Replay   `json:"replay"`
	Changes []Change `json:"changes,omitempty"`
}

// ChangesDigest names a list of changes: an approval confirms the changes
// it was shown by quoting their digest (ApproveConfirmed).
func ChangesDigest(changes []Change) string {
	h := sha256.New()
	for _, c := range changes {
		fmt.Fprintf(h, "%s\x00%s\x00%d", c.Kind, c.Queue, c.Messages)
		if c.Replay != "" {
			fmt.Fprintf(h, "\x00%s", c.Replay)
		}
		fmt.Fprintln(h)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ErrApprovalFailed means an approval could not be completed after the
// token was consumed; nothing was sent and the token was released, so the
// preview can be approved again.
var ErrApprovalFailed = errors.New("the approval could not be completed; nothing was sent")

// NewReplayID returns a new replay id: "r_" and 16 random hex characters.
func NewReplayID() string { return NewID("r_") }

// NewID returns prefix and 16 random hex characters: the shape of replay
// ids ("r_"), worker ids ("w_") and per-run owner ids.
func NewID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}

// TokenReplayID returns the replay id of a preview token's attempt-th
// approval: "r_" and 16 hex characters of a hash of both, so the token
// cannot be read back from it.
func TokenReplayID(token string, attempt int) string {
	h := sha256.Sum256([]byte("dlqbot replay id\x00" + token + "\x00" + strconv.Itoa(attempt)))
	return "r_" + hex.EncodeToString(h[:8])
}

// DefaultOwnAtApproval is Config.Tune.OwnAtApproval's default: how many
// previewed messages an approval owns before it returns; its runs own the
// rest beside their first steps (ownRest). A
// replay's first steps send far fewer (the canary doubles from 10), and
// owning 1,000,000 ids takes seconds of Redis scripts the first copy
// need not wait for. An approval that takes over owns everything at once:
// it must say what it took from whom.
const DefaultOwnAtApproval = 10000

// TakeOverWords says what r took over at its approval ("" when nothing):
// "taken over from r_…: 30 message(s) …" for what replays that had
// stopped or ended left (TakenFrom), "took over 40 message(s) from r_…"
// for what takeover=yes took from a live one (TookOver).
func TakeOverWords(r Replay) string {
	var out []string
	for _, rid := range slices.Sorted(maps.Keys(r.TakenFrom)) {
		out = append(out, fmt.Sprintf("taken over from %s: %d message(s) it owned and had not sent (it had stopped or ended: this replay sends them, %s does not)", rid, r.TakenFrom[rid], rid))
	}
	if len(r.TookOver) > 0 {
		var parts []string
		for rid, n := range r.TookOver {
			parts = append(parts, fmt.Sprintf("%d message(s) from %s", n, rid))
		}
		slices.Sort(parts)
		out = append(out, "took over "+strings.Join(parts, ", ")+" (approved with takeover=yes: those replays do not send them)")
	}
	return strings.Join(out, "; ")
}
