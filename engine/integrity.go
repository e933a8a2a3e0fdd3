package engine

import "errors"

// ErrBadSignature means a stored record (a frozen preview, a replay) failed
// its signature check: it was changed outside dlqbot (someone with write
// access to Redis), was written without the signing key, or is signed with
// another key. The operation that read it is refused; nothing is sent.
var ErrBadSignature = errors.New("stored record failed its signature check")
