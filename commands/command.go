package commands

import (
	"strconv"
	"strings"

	"github.com/stroma/dlqbot/engine"
)

// Command is one parsed /dlq command. It is a closed sum type: the concrete
// types are HelpCmd, ListCmd, PreviewCmd, ReplayCmd, StatusCmd, PauseCmd,
// ResumeCmd, CancelCmd and CheckCmd; dispatch with a type switch.
type Command interface {
	// Name is the subcommand word: "help", "preview", "pause", ….
	Name() string
	// String renders the command canonically, without the "/dlq " or
	// "dlqbot " prefix. Parse(c.String()) yields c again.
	String() string
	isCommand()
}

// HelpCmd asks for help, on everything (Topic "") or on one subcommand,
// filter or replay parameter (Topic "preview", "reason", "step", …).
type HelpCmd struct {
	Topic string
}

// ListCmd lists the dead-letter queues the caller may read (status lists
// the replays).
type ListCmd struct{}

// PreviewCmd previews what replaying a selection would do; it changes
// nothing. Selection.To is the to= target, "" for each message's source.
type PreviewCmd struct {
	Selection engine.Selection
}

// ReplayCmd starts the replay frozen by a preview token. Zero Params fields
// mean the defaults; Params.Rate < 0 means unpaced (rate=max).
type ReplayCmd struct {
	Token  string
	Params engine.Params
}

// StatusCmd shows one replay, or the active and recent ones when ReplayID
// is "".
type StatusCmd struct {
	ReplayID string
}

// PauseCmd pauses a running replay.
type PauseCmd struct {
	ReplayID string
}

// ResumeCmd resumes a paused or stopped replay. Resend is "" or
// engine.ResendInDoubt (resend=in-doubt): the copies in doubt are sent
// again first.
type ResumeCmd struct {
	ReplayID string
	Resend   string
}

// Action is the engine's control action for c: resume, or resume
// resend=in-doubt.
func (c ResumeCmd) Action() engine.ControlAction {
	if c.Resend == engine.ResendInDoubt {
		return engine.ControlResumeResend
	}
	return engine.ControlResume
}

// CancelCmd cancels a replay; messages not yet sent stay in the DLQ.
type CancelCmd struct {
	ReplayID string
}

// CheckCmd reports whether a replay's messages came back.
type CheckCmd struct {
	ReplayID string
}

func (HelpCmd) isCommand()    {}
func (ListCmd) isCommand()    {}
func (PreviewCmd) isCommand() {}
func (ReplayCmd) isCommand()  {}
func (StatusCmd) isCommand()  {}
func (PauseCmd) isCommand()   {}
func (ResumeCmd) isCommand()  {}
func (CancelCmd) isCommand()  {}
func (CheckCmd) isCommand()   {}

// Name returns "help".
func (HelpCmd) Name() string { return "help" }

// Name returns "list".
func (ListCmd) Name() string { return "list" }

// Name returns "preview".
func (PreviewCmd) Name() string { return "preview" }

// Name returns "replay".
func (ReplayCmd) Name() string { return "replay" }

// Name returns "status".
func (StatusCmd) Name() string { return "status" }

// Name returns "pause".
func (PauseCmd) Name() string { return "pause" }

// Name returns "resume".
func (ResumeCmd) Name() string { return "resume" }

// Name returns "cancel".
func (CancelCmd) Name() string { return "cancel" }

// Name returns "check".
func (CheckCmd) Name() string { return "check" }

// String renders "help" or "help <topic>".
func (c HelpCmd) String() string { return joinNonEmpty("help", c.Topic) }

// String renders "list".
func (ListCmd) String() string { return "list" }

// String renders "preview <dlq> [filters] [to=<queue>]" using
// engine.Selection.String, plus vhost=/ when the default vhost was named
// explicitly (Selection.String leaves it out).
func (c PreviewCmd) String() string {
	s := c.Selection.String()
	if c.Selection.Vhost == "/" {
		dlq, rest, _ := strings.Cut(s, " ")
		s = joinNonEmpty(dlq+" vhost=/", rest)
	}
	return "preview " + s
}

// String renders "replay <token>" followed by the parameters that are set.
func (c ReplayCmd) String() string {
	parts := []string{"replay", c.Token}
	p := c.Params
	if p.Step > 0 {
		parts = append(parts, "step="+strconv.Itoa(p.Step))
	}
	if p.Cap > 0 {
		parts = append(parts, "cap="+strconv.Itoa(p.Cap))
	}
	switch {
	case p.Auto:
		parts = append(parts, "rate=auto")
	case p.Rate < 0:
		parts = append(parts, "rate=max")
	case p.Rate > 0:
		parts = append(parts, "rate="+strconv.FormatFloat(p.Rate, 'f', -1, 64))
	}
	if p.Max > 0 {
		parts = append(parts, "max="+strconv.FormatFloat(p.Max, 'f', -1, 64))
	}
	if p.Timeout > 0 {
		parts = append(parts, "timeout="+p.Timeout.String())
	}
	if p.TakeOver {
		parts = append(parts, "takeover=yes")
	}
	return strings.Join(parts, " ")
}

// String renders "status" or "status <replay>".
func (c StatusCmd) String() string { return joinNonEmpty("status", c.ReplayID) }

// String renders "pause <replay>".
func (c PauseCmd) String() string { return "pause " + c.ReplayID }

// String renders "resume <replay>".
func (c ResumeCmd) String() string {
	if c.Resend != "" {
		return "resume " + c.ReplayID + " resend=" + c.Resend
	}
	return "resume " + c.ReplayID
}

// String renders "cancel <replay>".
func (c CancelCmd) String() string { return "cancel " + c.ReplayID }

// String renders "check <replay>".
func (c CheckCmd) String() string { return "check " + c.ReplayID }

func joinNonEmpty(a, b string) string {
	if b == "" {
		return a
	}
	return a + " " + b
}
