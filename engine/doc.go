// Package engine owns what dlqbot knows about dead letters and what it does
// with them: the metadata derived from each message (README "Dead-letter
// dialects"), selections and previews (README "Reading a DLQ without
// changing it") and replays (README "Replaying: confirm, record, then ack").
//
// The engine talks to the outside world only through small interfaces: the
// ports*.go files hold those shared by several parts, and the others are
// declared beside the code that needs them. Every interface, by file:
//
//	ports.go          Clock, Broker, Stats (RabbitMQ)
//	ports_work.go     Jobs, Registry (work hand-off)
//	ports_tap.go      Taps, Returns (the DLQs' taps and the copies that came back)
//	replay_state.go   Replays, Leases (replay records and ownership)
//	frozen.go         Tokens, Ledger (preview tokens, what was sent)
//	budget.go         ReadMarks (the read budget of quorum DLQs)
//	move.go           Mover (parking messages)
//	scheduler.go      Schedule (follow-up checks)
//	events.go         Notifier (progress events)
//	service.go        ScanObserver (preview metrics)
//
// Every collaborator a Service uses is a field of Deps, given to New; none
// is discovered by a type assertion or set afterwards. The RabbitMQ adapter
// lives in engine/amqp and the Redis implementations in store/, each with
// a compile-time assertion of the interfaces it implements; engine imports
// neither go-redis nor slack-go, so every rule here can be read without
// knowing the transports.
//
// Reads of a quorum DLQ cost delivery attempts on RabbitMQ before 4.3;
// budget.go holds the read budget's rules: how many reads the delivery limit
// leaves, how many a replay needs, and the error that stops a read before it
// could bring a message to its limit (ErrReadBudget).
package engine
