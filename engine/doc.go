// Package engine owns what dlqbot does with dead letters: selections and
// previews (docs/design.md "Reading a DLQ without changing it") and replays
// ("Replaying: confirm, record, then ack"). Reading one dead letter (its
// metadata, dialects, id, failure group and the headers of its copies) is
// package engine/letter's; letter_aliases.go gives letter's names here too
// (engine.Meta, engine.Message, …), so that the packages outside the engine
// need not import it. The approval's proof that no previewed message left
// the DLQ (begun at the preview, proven at the approval) is package
// engine/proof's; proof_ports.go serves its ports from the engine's and
// gives its names here too (engine.ApprovalProof, engine.Watches).
//
// The engine talks to the outside world only through small interfaces: the
// ports*.go files hold those shared by several parts, and the others are
// declared beside the code that needs them. Every interface, by file:
//
//	ports.go          Clock, Broker, CounterReader, ConsumerLister (RabbitMQ)
//	ports_tap.go      Taps, Returns, TapGaps (the DLQ's tap, the copies that came
//	                  back, and the windows the tap was missing)
//	ports_work.go     Jobs, Registry (work hand-off)
//	ports_claims.go   Claims, ClaimsBy (who holds each message id of a DLQ)
//	replay_state.go   Replays, Leases (replay records and ownership)
//	frozen.go         Tokens (preview tokens: what a preview froze)
//	ledger.go         Ledger (what every replay sent)
//	budget.go         ReadMarks (the read budget of quorum DLQs)
//	move.go           Mover (moving messages: replay steps and parking);
//	                  CursorMover, the mover's cursor support, is the one
//	                  capability found by a type assertion (cursor.go)
//	scheduler.go      Schedule (follow-up checks)
//	events.go         Notifier (progress events)
//	service.go        ScanObserver (preview metrics)
//	authorize.go      Authorizer (a worker's own policy, asked before a run sends)
//	queues.go         QueueLister (the vhost's queues, for a list of DLQs)
//	alerts.go         AlertStore (the DLQ watch's alerts, one per DLQ, shared
//	                  by the replicas; the watch is package ops's)
//	proof_ports.go    Watches (the approval proof's watches: package
//	                  proof's port, named here too)
//
// Where each part of the engine lives:
//
//	service.go        Config, Deps and New; enqueue.go hands a replay to workers
//	letter_aliases.go engine/letter's names (Meta, Message, …), given here too
//	selection.go      the selection grammar's meaning (Selection, Match,
//	                  MatchHeaders on a message's headers)
//	redaction.go      what a preview shows of a message, redacted (its
//	                  excerpt and headers)
//	preview.go        a preview; preview_rows.go, preview_targets.go,
//	                  preview_summary.go (counts and problems),
//	                  preview_canary.go (the first step's classes and depth)
//	                  and preview_returns.go build it; arrivals.go its sparkline;
//	                  targets_order.go the order every front end lists targets in
//	                  preview_verdict.go the count every front end's verdict
//	                  headline gives (Warnings)
//	kinds.go          the kinds of problems, changes and failures
//	frozen.go         what a preview token freezes, and freeze
//	approve.go        approving a token: what changed since (Compare), Approve
//	approve_id.go     a token's replay ids: a replay under one means used
//	approve_items.go  an approval's view of its preview's items
//	approve_others.go what other replays did with the previewed ids;
//	                  approve_own.go the claims that count at an approval
//	                  and taking over what lapsed replays held
//	proof_ports.go    package proof's Prover as the Service's: its ports
//	                  served by the engine's, and what the preview and the
//	                  approval hand it (the proof that the DLQ did not
//	                  change since the preview is proof's)
//	verdict.go        a replay's verdict (clean, came back, could not tell),
//	                  written beside its state in every JSON document
//	runner.go         a replay's run: its state, and a worker starting it
//	                  (lease, record, preview, ledger); run_loop.go its
//	                  loop over the steps; run_halt.go a halt (pause,
//	                  cancel, shutdown, read budget, fault); run_stop.go the
//	                  stop causes and the stop written with the run's last
//	                  write (stopYield); run_end.go its end once the plan
//	                  is exhausted; run_record.go its writes of the record
//	                  and its events; run_words.go the sentences of its
//	                  shortfalls
//	claims.go         a step's claims on its messages and who else holds
//	                  or reads them; readers.go marks a run reading the DLQ
//	cursor.go         a run's cursor on the DLQ (held messages, its bounds)
//	giveway.go        a step's read giving back what it holds to another
//	                  replay looking for its picks, how long it waits for
//	                  that search (a paced step longer), and moving on
//	ledger_window.go  the ledger window of a batch about to be published
//	reconcile.go, reconnect.go, resend.go, recount.go
//	                  after a lost connection: reconciling the counts,
//	                  waiting for the broker, sending again what was in
//	                  doubt (PossibleDuplicateHeader), and the count a
//	                  stopped run leaves for the next run's proof
//	logthrottle.go    errors that keep happening, logged once in a while
//	plan.go, step.go  what each step sends (plan_index.go the plan's id
//	                  index); account.go books what its moves did (sent.go
//	                  what a step keeps of each copy it sent),
//	                  account_find.go accounts for every planned message
//	                  they did not find (missing, held elsewhere)
//	pacer.go          rate=auto's controller: the rate from the targets'
//	                  backlog and their consumers' acknowledgements;
//	                  pace_run.go samples the targets for it while sending
//	settle.go         a step settling; settle_returns.go the copies that
//	                  came back (from the tap, or by re-reading the DLQ);
//	                  settle_unverified.go the stop when the tap's record
//	                  of them fails its check (ErrReturnsUnverified);
//	                  settle_tail.go from the cursor's tail, where no tap can be;
//	                  settle_proof.go the counters' proof that ends it early,
//	                  settle_noack.go the targets' auto-ack consumers that
//	                  end it as soon as every copy left;
//	                  settle_overlap.go a step settling while the next sends,
//	                  and settle_breaker.go the breaker that stops it on returns;
//	                  settle_api.go settling without the management API
//	                  (StepResult.Evidence) and the stop that names it;
//	                  settle_bypass.go the check that copies bypass the
//	                  cursor; settle_scan.go a run's re-read of the DLQ;
//	                  settle_unjudged.go the copies not yet seen settling: a
//	                  step a pause ended, judged on resume; the copies sent
//	                  before a cancel, still watched; the rest, before "finished"
//	tapper.go         draining the DLQs' taps into the returns record
//	tap_watch.go      a run's watch over its tap: a lost tap is noticed at once,
//	                  declared again, and its window recorded (reconciled in
//	                  settle_returns.go and check_tap.go, else Unseen)
//	check.go, check_tap.go, scheduler.go  the check and its follow-ups;
//	                  check_types.go its report (CheckReport, Unseen)
//	park.go           moving copies at the park limit to a parking queue
//	resume_acks.go    the acks a lost connection did not carry, completed by
//	                  the next run (originals of confirmed copies, acked)
//	worker.go, heartbeat.go, reaper.go, control.go, desire.go, control_action.go
//	                  workers, leases, interrupted replays, pause/resume/cancel;
//	                  authorize.go a worker's refusal of a replay its policy does not allow
//	integrity.go      ErrBadSignature, a stored record changed outside dlqbot
//	window_take.go    WindowTake, the outcome of taking from a sliding window
//	                  (ops.Windows, kept by the store)
//
// Every collaborator a Service uses is a field of Deps, given to New; none
// is set afterwards, and only the mover's cursor support is discovered by
// a type assertion. New refuses a Service without the ports production
// always sets (Broker, Tokens, Ledger, Replays, Leases, Mover, Schedule);
// the others are optional. The RabbitMQ adapter lives in engine/amqp and
// the Redis implementations in store/, each with a compile-time
// assertion of the interfaces it implements; engine imports neither
// go-redis nor slack-go, so every rule here can be read without knowing
// the transports.
//
// kinds.go names what can go wrong or change as typed constants: a
// preview's ProblemKind, an approval's ChangeKind, a replay's FailureKind and
// a move's MoveFailureKind (their JSON values are listed in api/openapi.yaml).
//
// Reads of a quorum DLQ cost delivery attempts on RabbitMQ before 4.3;
// budget.go holds the read budget's rules: how many reads the delivery limit
// leaves, how many a replay needs, and the error that stops a read before it
// could bring a message to its limit (ErrReadBudget), and the one that
// refuses a read whose budget cannot be told (ErrBudgetUnknown: the budget
// fails closed).
package engine
