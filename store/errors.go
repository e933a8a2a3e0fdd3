package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// Errors specific to the store; the engine's sentinel errors are used
// wherever the engine contract names one.
var (
	// ErrReplayExists means Create was called with an id that is taken.
	ErrReplayExists = errors.New("store: replay already exists")
	// ErrLeaseHeld means UpdateUnowned found the replay's lease held by an
	// owner, who alone may write the replay.
	ErrLeaseHeld = errors.New("store: replay lease is held")
)

// fail wraps err as "store: <op>: <err>", adding engine.ErrStoreUnavailable
// when err shows that Redis could not be reached.
func fail(err error, format string, args ...any) error {
	op := fmt.Sprintf(format, args...)
	if unavailable(err) {
		return fmt.Errorf("store: %s: %w: %w", op, engine.ErrStoreUnavailable, err)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// unavailable reports whether err means Redis could not be reached or cannot
// serve right now (refused or dropped connections, timeouts, a node loading
// its data set, a cluster or master that is down, a failover in progress).
// A cancelled context is the caller's decision, not an outage.
func unavailable(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, context.DeadlineExceeded):
		return true
	case redis.IsLoadingError(err), redis.IsClusterDownError(err),
		redis.IsMasterDownError(err), redis.IsTryAgainError(err),
		redis.IsReadOnlyError(err):
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "connection reset", "broken pipe",
		"no such host", "i/o timeout", "unreachable"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// execPipe runs pipe and returns the first error other than redis.Nil: Exec
// alone reports the first failed command, which may be a harmless
// redis.Nil hiding a later connection error.
func execPipe(ctx context.Context, pipe redis.Pipeliner) error {
	cmds, err := pipe.Exec(ctx)
	if err == nil {
		return nil
	}
	for _, c := range cmds {
		if e := c.Err(); e != nil && !errors.Is(e, redis.Nil) {
			return e
		}
	}
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}
