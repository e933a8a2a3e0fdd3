// Package engine owns what dlqbot knows about dead letters and what it does
// with them: the metadata derived from each message (§2), selections (§3),
// previews (§4) and replays (§5).
//
// The engine talks to the outside world only through the small interfaces
// declared in ports.go. The RabbitMQ adapter lives in engine/amqp and the
// Redis implementations in store/; engine imports neither go-redis nor
// slack-go, so every rule here can be read without knowing the transports.
//
// Reads of a quorum DLQ cost delivery attempts on RabbitMQ before 4.3;
// budget.go holds the read budget's rules: how many reads the delivery limit
// leaves, how many a replay needs, and the error that stops a read before it
// could bring a message to its limit (ErrReadBudget).
package engine
