package audit

// Concludes reports whether e is the outcome of the operation that begun
// announced: begun is an OutcomeBegun entry, e a later entry that is not,
// of the same operation by the same caller through the same front end,
// about the same token, replay and DLQ wherever begun names them (an
// approval's begun entry names no replay yet; its outcome names the one
// it created). The trail has no field linking the two: two identical
// operations begun at once are told apart only by order, which is all a
// reader needs to know that each has its outcome.
func Concludes(e, begun Entry) bool {
	same := func(b, x string) bool { return b == "" || b == x }
	return begun.Outcome == OutcomeBegun && e.Outcome != OutcomeBegun &&
		e.Op == begun.Op && e.Identity == begun.Identity && e.Principal == begun.Principal && e.FrontEnd == begun.FrontEnd &&
		same(begun.TokenRef, e.TokenRef) && same(begun.ReplayID, e.ReplayID) && same(begun.DLQ, e.DLQ)
}
