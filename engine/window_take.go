package engine

import (
	"time"
)

// WindowTake is the outcome of taking n from a sliding time window
// shared by every replica (ops.Windows, kept by the store's Windows): it
// lives here, in the vocabulary both the operations layer and the store
// import, so that the store need not import the operations layer.
type WindowTake struct {
	OK   bool
	ID   string
	Used int
	// RetryAfter is when the next take could fit, when !OK.
	RetryAfter time.Duration
}
