// Package replay runs replays (docs/design.md "Replaying: confirm, record,
// then ack"): a worker takes an approved replay, holds its lease and runs
// it in steps, each step sending its copies (confirmed and recorded in the
// ledger before the originals are acked), then settling: the copies
// consumed, none come back, or the replay stops by itself. Its Service
// holds package engine/review's and answers for it what the front ends
// ask (front.go), so one Service previews, approves, checks and runs.
//
// A run is the loop over its steps, their sends and its record; four
// concerns keep their own state and methods, each a type that embeds the
// runPart (runner.go) it knows the run by:
//
//	ownership     the run's share of its DLQ with other readers: claims,
//	              reading marks, giving way (ownership.go)
//	returnsFinder the copies that came back: by the tap, the cursor's tail
//	              or a re-read (returns.go)
//	judge         each step's verdict, on which evidence, and the steps
//	              left undecided (judge.go)
//	recovery      after a lost connection: the cut step, the resend of the
//	              copies in doubt, the acks it did not carry (recovery.go)
//
// Where each part lives:
//
//	service.go        the Service and New (Config and Deps are review's)
//	front.go          what the front ends ask (ops.Engine) and the reaper and
//	                  follow-ups, answered by review's Service
//	worker.go         Work: a worker's loop over the replays handed to it
//	heartbeat.go      a run's lease, kept alive while it runs
//	control.go        a run's view of its desired state (pause, cancel)
//	runner.go         a replay's run: its state, the runPart its concerns
//	                  share, and a worker starting it (lease,
//	                  authorization, record, preview, ledger)
//	run_loop.go       its loop over the steps; run_halt.go a halt (pause,
//	                  cancel, shutdown, read budget, fault); run_stop.go the
//	                  stop causes and the stop written with the run's last
//	                  write; run_end.go its end once the plan is exhausted,
//	                  and its follow-up checks; run_record.go its writes of
//	                  the record and its events; run_words.go the sentences
//	                  of its duplicates and of nothing sent
//	step.go           a step: what it sends, in chunks, and its progress
//	ledger_window.go  the ledger window of a batch about to be published
//	sent.go           what a step keeps of each copy it sent
//	account.go        booking what a step's moves did; account_find.go
//	                  accounting for every planned message they did not
//	                  find (missing, held elsewhere)
//	cursor.go         a run's cursor on the DLQ (held messages, its bounds)
//	pace_run.go       sampling the targets for rate=auto's pacer, beside the publishes
//	                  (held to one a second while a sample is late)
//	recount.go        the count a stopped run leaves for the next run's
//	                  proof
//
// ownership's files:
//
//	ownership.go      its state
//	claims.go         a step's claims on its messages and who else holds or
//	                  reads them
//	readers.go        the run's reading mark
//	giveway.go        a step's read giving back what it holds to another
//	                  replay looking for its picks
//
// returnsFinder's files:
//
//	returns.go        its state
//	settle_returns.go the copies that came back, from the tap or by
//	                  re-reading the DLQ
//	settle_tail.go    the copies that came back found at the cursor's tail
//	                  (a classic DLQ without a tap)
//	settle_scan.go    a run's re-read of the DLQ
//	settle_bypass.go  the check that copies bypass the cursor
//	tapper.go         draining the DLQs' taps into the returns record
//	tap_watch.go      a run's watch over its tap: a lost tap is noticed at
//	                  once, declared again, and its window recorded
//
// judge's files:
//
//	judge.go          its state
//	settle.go         a step settling
//	settle_proof.go   the counters' proof that ends it early
//	settle_noack.go   the targets' auto-ack consumers that end it as soon
//	                  as every copy left
//	settle_api.go     settling without the management API
//	settle_overlap.go a step settling while the next sends
//	settle_breaker.go the breaker that stops it on returns
//	settle_unverified.go the stop when the tap's record of the returns
//	                  fails its check
//	settle_unjudged.go the copies not yet seen settling
//
// recovery's files:
//
//	recovery.go       its state
//	reconcile.go      reconciling the counts after a lost connection
//	reconnect.go      waiting for the broker
//	resend.go         sending again what was in doubt
//	resume_acks.go    the acks a lost connection did not carry, completed by
//	                  the next run (originals of confirmed copies, acked)
package replay
