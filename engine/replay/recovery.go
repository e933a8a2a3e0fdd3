package replay

// recovery is what a run does about a lost connection: settling the step
// it cut after the reconnect (reconnect.go, reconcile.go), resending the
// copies in doubt when asked (resend.go), and acking the originals of
// copies the ledger holds as confirmed (resume_acks.go).
type recovery struct {
	runPart
	// rs resends the copies in doubt (resume resend=in-doubt); nil when
	// not asked for.
	rs *resender
	// resending is true during a step of rs.
	resending bool
	// cut is the step a lost connection ended, settled after the
	// reconnect (reconcile.go).
	cut *cutStep
	// confirmed and pendingBy are the ledger's confirmed copies and copies
	// in doubt per id, droppedIDs the originals of confirmed copies the
	// run acked without a copy, and dropNote why some could not be
	// (resume_acks.go).
	confirmed  map[string]int
	pendingBy  map[string]int
	droppedIDs map[string]int
	dropNote   string
}
