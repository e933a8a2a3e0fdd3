package replay

import "github.com/stroma/dlqbot/engine/review"

// Service runs replays: the worker that takes approved replays and runs
// them in steps, and what it needs beside (the taps' drainer, the
// reaper). Previews, checks, approvals and the control of a replay's
// state are review.Service's, which it embeds: one Service answers both.
type Service struct {
	*review.Service
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
	return &Service{Service: rs}, nil
}
