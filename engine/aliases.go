package engine

import (
	"github.com/stroma/dlqbot/engine/letter"
)

// Reading one dead letter (its metadata, dialects, fingerprint, failure
// group and the headers of its copies) is package letter's. The names below
// are letter's, given here too so that the packages outside the engine keep
// writing engine.Meta, engine.ReasonRejected and so on: they are the same
// types, constants and functions, not copies. The engine's own code writes
// letter.X.

// Types.
type (
	Message       = letter.Message
	Meta          = letter.Meta
	Dialect       = letter.Dialect
	Reason        = letter.Reason
	HeaderDialect = letter.HeaderDialect
)

// Dialects and reasons.
const (
	DialectRabbitMQ = letter.DialectRabbitMQ
	DialectSpring   = letter.DialectSpring
	DialectRascal   = letter.DialectRascal
	DialectUnknown  = letter.DialectUnknown

	ReasonRejected      = letter.ReasonRejected
	ReasonExpired       = letter.ReasonExpired
	ReasonMaxLen        = letter.ReasonMaxLen
	ReasonDeliveryLimit = letter.ReasonDeliveryLimit
	ReasonException     = letter.ReasonException
	ReasonSkipped       = letter.ReasonSkipped
	ReasonUnknown       = letter.ReasonUnknown
)

// Headers a replay sets on its copies.
const (
	HeaderReplayID     = letter.HeaderReplayID
	HeaderReplayedFrom = letter.HeaderReplayedFrom
)

// Functions.
var (
	ParseMetaDialect   = letter.ParseMetaDialect
	ParseHeaderDialect = letter.ParseHeaderDialect
	Fingerprint        = letter.Fingerprint
	FailureType        = letter.FailureType
	ReplayHeaders      = letter.ReplayHeaders
	IsRemovedHeader    = letter.IsRemovedHeader
	BadNameRune        = letter.BadNameRune
	MixedScripts       = letter.MixedScripts
)
