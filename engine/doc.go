// Package engine is dlqbot's vocabulary: the types every part of dlqbot
// speaks in (Replay, Frozen, Preview, Change, CheckReport, the events and
// the kinds of problems, changes and failures), the sentinel errors, every
// port the engine needs from the outside world, and the rules that need no
// service to apply (the selection grammar, the read budget, the plan of
// steps, rate=auto's pacer). It declares no service: previews, checks,
// approvals and the control of a replay are package engine/review's, and
// running a replay is package engine/replay's (whose Service holds
// review's). Reading one dead letter is package engine/letter's;
// aliases.go gives letter's names here too (engine.Meta, engine.Message,
// …), so that packages outside the engine need not import it. It imports
// nothing else of the module. The approval's proof that no previewed
// message left the DLQ is package engine/proof's, which imports engine:
// the proof a token carries (ApprovalProof) and the watch's port
// (Watches) are declared here, in approval_proof.go.
//
// The ports, by file (the engine talks to the outside world only through
// them):
//
//	ports.go          Clock, Broker, CounterReader, ConsumerLister (RabbitMQ),
//	                  ScanObserver (preview metrics), NodeLostError and
//	                  ErrBrokerUnavailable
//	ports_tap.go      Taps, Returns, TapGaps (the DLQ's tap, the copies that
//	                  came back, and the windows the tap was missing)
//	ports_work.go     Jobs, Registry (work hand-off), Schedule (follow-up
//	                  checks), Authorizer (a worker's own policy), the
//	                  WorkerConfig and the errors of control
//	ports_claims.go   Claims, ClaimsBy (who holds each message id of a DLQ)
//	replay_state.go   Replays, Leases (replay records and ownership), with
//	                  the record itself: Replay, State, Params, Failure,
//	                  CountMark, UnjudgedStep
//	frozen.go         Tokens (preview tokens: what a preview froze, Frozen)
//	ledger.go         Ledger (what every replay sent)
//	budget.go         ReadMarks (the read budget of quorum DLQs), and the
//	                  budget's rules
//	move.go           Mover (moving messages: replay steps and parking),
//	                  CursorMover, the mover's cursor support,
//	                  ReadKeeper (an approval's read kept for its run), and
//	                  TailCursor, a cursor that reads on at the DLQ's tail;
//	                  PossibleDuplicateHeader
//	events.go         Notifier (progress events) and the event kinds
//	queues.go         QueueLister (the vhost's queues, for a list of DLQs)
//	alerts.go         AlertStore (the DLQ watch's alerts, one per DLQ)
//	approval_proof.go ApprovalProof (what a preview freezes for its
//	                  approval's proof), Watches and WatchLook (the watch
//	                  queue that counts what reached a DLQ since its preview)
//	aliases.go        letter's names, given here too
//
// The rest, by file:
//
//	selection.go      the selection grammar's meaning (Selection, Match)
//	redaction.go      Redactor and HeaderLine: what a preview may show
//	preview.go        Preview, its messages and targets, Since and
//	                  SinceVerdict, ReturnsView
//	preview_canary.go the first step's classes and depth (FirstStepCover)
//	preview_verdict.go the count every front end's verdict headline gives
//	targets_order.go  the order every front end lists targets in
//	arrivals.go       a preview's sparkline of arrivals
//	kinds.go          the kinds of problems, changes and failures
//	approve.go        Change, Approval, ChangesDigest, TokenReplayID and the
//	                  take-over words of an approval
//	plan.go           what each step sends (Plan, PlanOf, StepSize, CopiesIn);
//	                  plan_index.go the plan's id index
//	pacer.go          rate=auto's controller (Pacer)
//	cursor.go         a run's cursor bounds (HoldBound, DefaultCursorHold,
//	                  TailKeep), DefaultBypassEvery
//	claims.go         a claim's and a holder's words (Claim, HeldBy)
//	control_action.go pause/resume/cancel as values (ControlAction) and the
//	                  desired state's results and errors
//	check_types.go    the check's report (CheckReport, CheckGroup, Unseen)
//	deaths.go         when a dead letter died (LatestDeath, DiedAfterSecondOf)
//	verdict.go        a replay's verdict (clean, came back, could not tell)
//	words.go          the sentences of a replay's shortfalls
//	park.go           ParkResult and ParkingQueue
//	integrity.go      ErrBadSignature, a stored record changed outside dlqbot
//	window_take.go    WindowTake, the outcome of taking from a sliding window
//
// The RabbitMQ adapter lives in engine/amqp and the Redis implementations
// in store/, each with a compile-time assertion of the interfaces it
// implements; engine imports neither go-redis nor slack-go, so every rule
// here can be read without knowing the transports.
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
