package engine

import (
	"errors"
)

// ErrBadSignature means a stored record (a frozen preview, a replay) failed
// its signature check: it was changed outside dlqbot (someone with write
// access to Redis), was written without the signing key, or is signed with
// another key. The operation that read it is refused; nothing is sent.
var ErrBadSignature = errors.New("stored record failed its signature check")

// ErrReturnsUnverified means a run stopped because the tap's record of its
// returns failed its check (Returns refused it with ErrBadSignature, or it
// counted fewer returns than the run had read): whether the copies sent
// came back cannot be told from it. The replay is stopped, saying so, and
// its record keeps the reason (Replay.ReturnsUnverified).
var ErrReturnsUnverified = errors.New("the tap's record of returns cannot be trusted")
