package blocks

import "github.com/stroma/dlqbot/engine"

// View says who a rendering is for, and so what it may show of a failure.
type View int

const (
	// ChannelView is a message a whole channel sees (a post, an edit, a
	// thread reply, an activity line). Of a failure it shows only an
	// allowlist: the failure group's id, its exception type or dead-letter
	// reason (engine.FailureType), counts, message ids and queue names —
	// never an exception's message or stack, a header's value or a
	// payload, whatever redaction rules say.
	ChannelView View = iota
	// PrivateView is a reply to one reader of the DLQ (ephemeral, a direct
	// message): it may show failure groups' normalised texts and examples'
	// exception texts, already redacted by the engine.
	PrivateView
)

// failureName is what view may show of a failure group: its text in the
// private view, else its type (the reason when it has none).
func failureName(v View, group, typ string) string {
	if v == PrivateView && group != "" {
		return group
	}
	if typ == "" {
		return "failure" // a record from before types were kept
	}
	return typ
}

// channelRow keeps of an arrival row only what a channel may see.
func channelRow(r engine.ArrivalRow) engine.ArrivalRow {
	r.Key = failureName(ChannelView, r.Key, r.Type)
	return r
}
