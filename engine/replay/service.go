package replay

import "github.com/stroma/dlqbot/engine/review"

// Service runs replays: the worker that takes approved replays and runs
// them in steps, and what it needs beside (the taps' drainer, the
// reaper). Previews, checks, approvals and the control of a replay's
// state are review.Service's, which it holds: front.go answers the front
// ends (ops.Engine) through it, so one Service answers both.
type Service struct {
	// rev previews, approves, checks, parks and controls replays.
	rev *review.Service
	// base is what the runs share with rev: the taps' records, the
	// ledger's pages, the waits for a quiet DLQ, the log of failures
	// carried on after; cfg and d are its configuration and ports.
	base *review.Base
	cfg  Config
	d    Deps
}

// Config and Deps are review's: the one configuration and the one set of
// ports both halves share.
type (
	Config = review.Config
	Deps   = review.Deps
)

// New validates cfg and deps (review.New) and returns a Service.
func New(cfg Config, d Deps) (*Service, error) {
	rs, err := review.New(cfg, d)
	if err != nil {
		return nil, err
	}
	return &Service{rev: rs, base: rs.Base, cfg: rs.Config(), d: rs.Deps()}, nil
}
