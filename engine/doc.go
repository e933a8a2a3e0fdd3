// Package engine owns what dlqbot knows about dead letters and what it does
// with them: the metadata derived from each message (README "Dead-letter
// dialects"), selections and previews (README "Reading a DLQ without
// changing it") and replays (README "Replaying: confirm, record, then ack").
//
// The engine talks to the outside world only through small interfaces, each
// declared beside the code that needs it:
//
//	ports.go          Clock, Broker, Stats, Declarer (RabbitMQ)
//	ports_work.go     Jobs, Registry, Active, Owners, Updater (work hand-off)
//	replay_state.go   Replays, Leases (replay records and ownership)
//	frozen.go         Tokens, Ledger (preview tokens, what was sent)
//	desire.go         Desirer, Yielder (pause, resume, cancel)
//	approve.go        Retainer (keeping a consumed token's preview)
//	budget.go         ReadMarks (the read budget of quorum DLQs)
//	move.go           Mover (parking messages)
//	scheduler.go      Schedule (follow-up checks)
//	events.go         Notifier (progress events)
//
// The RabbitMQ adapter lives in engine/amqp and the
// Redis implementations in store/; engine imports neither go-redis nor
// slack-go, so every rule here can be read without knowing the transports.
//
// kinds.go names what can go wrong or change as typed constants: a
// preview's ProblemKind, an approval's ChangeKind, a replay's FailureKind and
// a move's MoveFailureKind (their JSON values are listed in api/openapi.yaml).
//
// Reads of a quorum DLQ cost delivery attempts on RabbitMQ before 4.3;
// budget.go holds the read budget's rules: how many reads the delivery limit
// leaves, how many a replay needs, and the error that stops a read before it
// could bring a message to its limit (ErrReadBudget).
package engine
