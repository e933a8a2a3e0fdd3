// Package audit owns the shape of dlqbot's audit trail: one Entry for each
// operation a caller asked for (preview, approve, discard, pause, resume,
// cancel, park, check, resend), whether it was done, refused or failed,
// an operation that changes something announced by a begun entry before
// its effect, and the two ports that append entries (Recorder) and read them back
// (Reader). The operations layer records; store.Audit keeps the trail in
// Redis; the API, the terminal and the dashboard read it. An entry is
// never edited once appended.
//
// Files:
//
//	audit.go  Entry, its operations and outcomes, TokenRef, and the
//	          Recorder and Reader ports
//	begun.go  Concludes: which later entry is a begun operation's outcome
package audit
