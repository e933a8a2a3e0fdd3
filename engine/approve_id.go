package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// approvalAttempts bounds how many replay ids one preview token has: an
// approval withdrawn before anything ran (undoApproval) frees the token for
// the next id, at most this many times.
const approvalAttempts = 16

// TokenReplayID returns the replay id of a preview token's attempt-th
// approval: "r_" and 16 hex characters of a hash of both, so the token
// cannot be read back from it.
func TokenReplayID(token string, attempt int) string {
	h := sha256.Sum256([]byte("dlqbot replay id\x00" + token + "\x00" + strconv.Itoa(attempt)))
	return "r_" + hex.EncodeToString(h[:8])
}

// replayIDFor returns the id an approval of token creates its replay
// under: the first of the token's ids with no record. A record under one
// of them (signed, so not forged) that was not withdrawn means the token
// already started a replay: ErrTokenUsed, whatever the token's used marker
// (outside signed data) says. A record that cannot be read or verified
// refuses the approval too.
func (s *Service) replayIDFor(ctx context.Context, token string) (string, error) {
	for n := 0; n < approvalAttempts; n++ {
		id := TokenReplayID(token, n)
		r, err := s.d.Replays.Get(ctx, id)
		switch {
		case errors.Is(err, ErrReplayNotFound):
			return id, nil
		case err != nil:
			return "", fmt.Errorf("read replay %s: %w", id, err)
		case r.Token == token && r.Withdrawn:
			continue
		default:
			return "", fmt.Errorf("replay %s: %w", id, ErrTokenUsed)
		}
	}
	return "", fmt.Errorf("%d approvals withdrawn: %w", approvalAttempts, ErrTokenUsed)
}
