// Package amqp is dlqbot's RabbitMQ adapter: it implements engine.Broker on
// top of github.com/rabbitmq/amqp091-go and a small client for the
// management HTTP API.
//
// The package owns everything that talks to RabbitMQ:
//
//   - the AMQP connection, dialled lazily and re-dialled after it is lost;
//   - Inspect, a passive declare on a throwaway channel (a missing queue
//     closes only that channel), completed by the management API's view of
//     the queue type and delivery limit;
//   - Scan, the non-destructive read of a dead-letter queue: consumers with
//     manual acknowledgement hold every message of the queue unacked, one
//     channel per prefetch window so reading order stays queue order, then
//     cancel, drain and give everything back with Nack(0, multiple, requeue),
//     channel by channel in order (never a basic.get loop, never Reject,
//     never a bare close: on quorum queues every requeue may count a
//     delivery). A quorum queue with a delivery limit scrambles a large
//     multi-message requeue, so there the messages go back 32 at a time,
//     each step awaited (requeue.go). Requeues the queue has not applied
//     yet (quorum queues apply them asynchronously; a classic queue answers
//     a passive declare ahead of requeues still queued for it) are
//     remembered, and the next read of that queue waits for them; a read
//     also waits briefly for other consumers of the queue to let go
//     (another reader, another process's quorum requeues). A read ends by the
//     queue's count — the messages ready when it began — never by a pause
//     in deliveries; it ends earlier only when the broker reports nothing
//     left for it, and then says so in its engine.Coverage (short);
//   - the read budget (budget.go): the queue's effective delivery limit
//     (argument, policy, operator policy, 4.0+'s default of 20, the broker's
//     version), a check before every read that no message can reach its
//     limit by it, a stop at a delivery whose count says otherwise, and a
//     mark of what the read left, kept in the engine.ReadMarks given as
//     Config.ReadMarks (Redis, shared by replicas), else in memory;
//   - Route, which resolves an exchange and routing key to queues through
//     the exchange's bindings as listed by the management API;
//   - QueueStats, the management API's statistics for a queue, and
//     Counters, the engine's QueueCounters taken from them (the step-settle
//     check uses them);
//   - the tap (tap.go): a bounded classic queue "dlqbot.tap.<dlq>" bound
//     exactly like a DLQ (bindings read from the management API), so every
//     dead letter routed to the DLQ reaches it too; DrainTap hands its
//     messages to the engine, which records returns without reading the
//     DLQ. A DLQ fed only through the default exchange cannot be tapped.
//     WatchTap (tap_watch.go) holds a consumer on the tap while a replay
//     runs and returns engine.ErrQueueNotFound the moment the broker
//     cancels it (the tap was deleted: Channel.NotifyCancel).
//   - the watch (watch.go): a bounded classic queue "dlqbot.watch.<random>"
//     bound as the DLQ is, opened by a preview and deleted by its
//     approval; its count is what reached the DLQ in between, read with a
//     passive declare (engine.Watches).
//
// The reader behind Scan (holdReader) yields deliveries in queue order and
// can acknowledge individual ones before giving the rest back, so the
// confirm-then-ack Move pass is built on the same piece. A Cursor
// (cursor.go) keeps one such read open across a replay's steps; once it
// has read the whole DLQ it keeps consuming the DLQ's tail (tail.go), so
// the replay sees what arrives there — its returns — without reading the
// DLQ again.
//
// What a scan cannot promise: on a quorum queue, messages published while
// the scan runs may end up ahead of the requeued ones, and a scan whose
// process dies midway has its messages requeued by the broker when the
// connection drops (nothing is lost, but a quorum queue's order can change).
package amqp
