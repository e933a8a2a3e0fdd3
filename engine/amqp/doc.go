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
//     remembered, and the next read of that queue waits for them, as
//     AwaitGiveBacks does for a process about to end; a read
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
//   - QueueDepths (list.go), every queue's depth from one request to the
//     management API's queue list: what the DLQ watch samples;
//   - QueueStats, the management API's statistics for a queue, and
//     Counters, the engine's QueueCounters taken from them (the step-settle
//     check uses them);
//   - the management client (mgmt.go) treats the API as a hint, never a
//     wait: every request has a short deadline (Config.HTTPTimeout), and a
//     node that did not answer in time or refused is left alone for
//     Config.ManagementCooldown, requests to it failing at once with
//     engine.ErrManagementDown, until a probe in the background finds it
//     answering again (mgmt_breaker.go);
//   - QueueConsumers (consumers.go), a queue's consumers and the
//     connections they run on (opened when, by which client), which tells
//     a preview whether its targets' consumers were restarted since the
//     messages failed;
//   - Delivered (delivered.go), the deliveries dlqbot's reads received
//     from a queue, counted where they arrive;
//   - the tap (tap.go): a bounded classic queue "dlqbot.tap.<dlq>" bound
//     exactly like a DLQ (bindings read from the management API), so every
//     dead letter routed to the DLQ reaches it too; DrainTap hands its
//     messages to the engine (tap_drain.go), which records returns without
//     reading the DLQ. A DLQ fed only through the default exchange cannot be tapped.
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
// DLQ again. A read that acks out of order (a Move's, a Cursor's) reads a
// classic queue in small windows (Config.CursorPrefetch), since the queue
// finds each ack by walking what its channel holds.
//
// What a scan cannot promise: on a quorum queue, messages published while
// the scan runs may end up ahead of the requeued ones, and a scan whose
// process dies midway has its messages requeued by the broker when the
// connection drops (nothing is lost, but a quorum queue's order can change).
//
// Files, beyond those named above:
//
//	broker.go        Config, its defaults, and Broker
//	conn.go          the connection per node and its channels; nodes.go
//	                 the cluster's AMQP and management nodes
//	scan.go          Scan, a read that changes nothing
//	reader.go        holdReader, the reader behind Scan and Move;
//	                 readend.go how it knows it has read the whole queue
//	cursor.go        Cursor, a reader held open across a replay's steps;
//	                 pack.go the headers of the messages it keeps, packed;
//	                 keep.go an approval's read kept as its run's cursor
//	move.go          Move, confirm-then-ack; move_confirm.go its confirms
//	countpoll.go     waiting for requeues to land, by the ready count
//	inspect.go       Inspect, a passive declare, and Look, that alone;
//	                 infocache.go a queue's
//	                 type, arguments and policies, cached briefly
//	limit.go         a quorum queue's delivery limit and the broker's version
//	list.go          ListQueues, the vhost's queues and dead-letter targets
//	route.go         Route: an exchange and routing key to queues
//	counters.go      Counters, the delivery counters the API has shown
//	depths.go        Depths, a queue's length over a recent span
//	arrivals.go      Arrivals, what reached a queue within a recent span
//	consumers.go     QueueConsumers, a queue's consumers and their connections
//	tap_mgmt.go      the bindings and direct feeders of a DLQ, for its tap
package amqp
