package blocks

import (
	"fmt"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// fixedNow is the time every fixture is rendered at, so the golden files
// stay the same.
func fixedNow() time.Time { return time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC) }

const (
	token    = "p_Zm9vYmFyYmF6cXV4cXV1eA"
	replayID = "r_0123456789abcdef"
	approver = "U012ABCDEF"
	asker    = "U0SUPPORT1"
)

// previewWithProblems is a preview where everything that can go wrong does.
func previewWithProblems() *engine.Preview {
	now := fixedNow()
	return &engine.Preview{
		Token:          token,
		ExpiresAt:      now.Add(24 * time.Hour).Format(time.RFC3339),
		DLQ:            engine.QueueInfo{Name: "orders.dlq", Exists: true, Ready: 57, Type: "quorum", DeliveryLimit: 20},
		Selection:      "orders.dlq reason=rejected",
		Requester:      asker,
		Scanned:        57,
		Selected:       48,
		FirstStepDepth: 12,
		CanaryClasses:  3,
		Classes:        4,
		Distinct:       45,
		Parked:         3,
		Problems: []engine.Problem{
			{Kind: engine.ProblemTargetMissing, Queue: "payments.settle", Messages: 5, Detail: "target queue payments.settle does not exist: its 5 message(s) would stay in the DLQ"},
			{Kind: engine.ProblemNoTarget, Messages: 2, Detail: "2 message(s) have no source queue that can be derived; they are left out — replay them with to=<queue>"},
			{Kind: engine.ProblemNoConsumers, Queue: "billing.retry", Messages: 3, Detail: "target queue billing.retry has no consumers now"},
			{Kind: engine.ProblemAlreadyReplayed, Messages: 4, Detail: "4 message(s) were already replayed before and failed again"},
			{Kind: engine.ProblemParked, Messages: 3, Detail: "3 message(s) were replayed park_after times or more"},
			{Kind: engine.ProblemDeliveryLimit, Queue: "orders.dlq", Messages: 57, Detail: "read budget: every read of orders.dlq gives each message back with nack(requeue), which RabbitMQ 4.0.5 counts against its delivery limit of 20 (RabbitMQ 4's default for quorum queues); a replay of these 48 message(s) needs 7 reads (the approval's check, then per step one to move and one to look for returns; 3 step(s) at the default 10, 20, 40… up to 500 — smaller steps need more) and the limit leaves 18. To raise the limit: rabbitmqctl set_policy -p / --apply-to queues dlqbot-limit-orders.dlq '^orders\\.dlq$' '{\"delivery-limit\":40}'"},
			{Kind: engine.ProblemUnreadable, Messages: 1, Detail: "1 message(s) have headers that could not be fully read"},
		},
		Targets: []engine.TargetView{
			{Queue: "billing.retry", Exists: true, Consumers: 0, Messages: 3, Reasons: map[engine.Reason]int{engine.ReasonRejected: 3}},
			{Queue: "orders.created", Exists: true, Consumers: 2, Messages: 40, Reasons: map[engine.Reason]int{engine.ReasonRejected: 30, engine.ReasonExpired: 10}},
			{Queue: "payments.settle", Exists: false, Messages: 5, Reasons: map[engine.Reason]int{engine.ReasonException: 5}},
		},
		Messages: []engine.PreviewMessage{
			{
				Meta: engine.Meta{
					ID: "a1b2c3d4e5f60718", Dialect: engine.DialectSpring, Source: "orders.created", Reason: engine.ReasonException,
					Attempts: 3, LastDeath: now.Add(-2 * time.Hour), ExceptionType: "java.lang.IllegalStateException",
					Exception: "order 4711 not found <@U999> & `rm -rf`", FailureGroup: "order <n> not found", ReplayCount: 1, ReplayID: "r_feedfacecafebeef",
					Size: 58, Excerpt: "{\"order\": 4711, \"note\": \"```<!channel> & co```\"}\n",
				},
				Count: 3, Target: "orders.created",
				Replayed: []engine.Sent{{ReplayID: "r_feedfacecafebeef", At: now.Add(-26 * time.Hour), Count: 1, Approver: approver}},
			},
			{
				Meta:  engine.Meta{ID: "0f1e2d3c4b5a6978", Dialect: engine.DialectRabbitMQ, Source: "payments.settle", Reason: engine.ReasonExpired, Attempts: 1, Size: 12, Excerpt: "plain payload"},
				Count: 1, Target: "payments.settle",
			},
			{
				Meta: engine.Meta{ID: "9988776655443322", Dialect: engine.DialectSpring, Exchange: "orders", RoutingKeys: []string{"order.*"}, NeedsRoute: true,
					Reason: engine.ReasonException, SourceNote: `exchange "orders" routes "order.*" to 2 queues; replay it with to=<queue>`, Size: 4, Excerpt: "\x00..."},
				Count: 2,
			},
		},
	}
}

// previewNothing is a preview of a DLQ whose matching messages are all
// parked.
func previewNothing() *engine.Preview {
	return &engine.Preview{
		DLQ:       engine.QueueInfo{Name: "orders.dlq", Exists: true, Ready: 12, Type: "classic"},
		Selection: "orders.dlq source=orders.created",
		Requester: asker,
		Scanned:   12,
		Parked:    3,
		Problems: []engine.Problem{
			{Kind: engine.ProblemParked, Messages: 3, Detail: "3 message(s) were replayed park_after times or more"},
		},
		Messages: []engine.PreviewMessage{
			{Meta: engine.Meta{ID: "1111222233334444", Source: "orders.created", Reason: engine.ReasonRejected, ReplayCount: 3}, Count: 3, Parked: true, Target: "orders.created"},
		},
	}
}

// replay returns a replay record in state s, part-way through.
func replay(s engine.State) engine.Replay {
	return engine.Replay{
		ID: replayID, Token: token, DLQ: "orders.dlq", Vhost: "/", Requester: asker, Approver: approver, State: s,
		Params: engine.Params{Step: 10, Cap: 500, Rate: 50, Timeout: time.Minute},
		Total:  1000, Sent: 30, Settled: 30, Step: 2,
		CreatedAt: fixedNow().Add(-3 * time.Minute), UpdatedAt: fixedNow(),
	}
}

// cancelledAfterGrace is a replay cancelled while its step 1 settled, as
// its run writes it once the copies it sent were watched for the step's
// grace: all 6 came back.
func cancelledAfterGrace() engine.Replay {
	r := replay(engine.StateCancelled)
	r.Sent, r.Settled, r.Returned, r.Step = 6, 6, 6, 1
	return r
}

// lastStep is the result of step 2.
func lastStep() *engine.StepResult {
	return &engine.StepResult{Step: 2, Planned: 20, Sent: 20, Settled: 20, Observation: "all 20 settled", Duration: 4200 * time.Millisecond}
}

// stoppedReplay came back in step 2: 12 returned copies and one unroutable.
func stoppedReplay() (engine.Replay, *engine.StepResult) {
	r := replay(engine.StateStopped)
	r.Settled, r.Returned, r.Failed, r.NewFailures, r.EndedAt = 18, 12, 1, 2, fixedNow()
	for i := range 12 {
		r.Failures = append(r.Failures, engine.Failure{
			ID: fmt.Sprintf("%016x", 0xabc000+i), Target: "orders.created", Kind: engine.FailureReturned, Reason: "rejected",
			Detail: fmt.Sprintf("order %d not found <script>", 4700+i), GroupID: engine.GroupID("order <n> not found <script>"),
		})
	}
	r.Failures = append(r.Failures, engine.Failure{ID: "00000000deadbeef", Target: "gone.queue", Kind: engine.FailureUnroutable, Reason: "NO_ROUTE"})
	// The engine's words: the step's observation is the stop's note.
	r.Note = "8 of 20 settled within 9s; 12 came back to orders.dlq"
	st := &engine.StepResult{Step: 2, Planned: 20, Sent: 20, Settled: 8, Returned: 12, Observation: r.Note, Duration: 9 * time.Second}
	return r, st
}

func finishedReplay() engine.Replay {
	r := replay(engine.StateFinished)
	r.Sent, r.Settled, r.Missing, r.Step, r.EndedAt = 997, 997, 3, 8, fixedNow()
	r.Failures = []engine.Failure{{ID: "1234567890abcdef", Target: "orders.created", Kind: engine.FailureMissing, Detail: "3 copy(ies) no longer in orders.dlq"}}
	r.Note = "997 sent, 997 settled, 0 came back, 3 missing, 0 not delivered"
	return r
}

// interruptedEvent is the reaper's event for a replay whose owner died.
func interruptedEvent() engine.Event {
	r := replay(engine.StateInterrupted)
	r.EndedAt = fixedNow()
	r.Note = "the process running it stopped without releasing it; 30 message(s) had been sent, the rest are still in orders.dlq"
	r.RestSelection = "orders.dlq reason=rejected"
	return engine.Event{
		Kind: engine.EventInterrupted, Replay: r, At: fixedNow(),
		Text: "replay r_0123456789abcdef was interrupted: 30 sent (a1b2c3d4e5f60718, 0f1e2d3c4b5a6978, … 28 more); 2 copy(ies) in doubt (in flight when it stopped: maybe delivered; listed in the ledger).",
	}
}

func changes() []engine.Change {
	return []engine.Change{
		{Kind: engine.ChangeConsumersGone, Queue: "orders.created", Messages: 40, Detail: "target queue orders.created had 2 consumer(s) at the preview and has none now"},
		{Kind: engine.ChangeMessagesGone, Queue: "orders.dlq", Messages: 4, Detail: "4 previewed message(s) are no longer in orders.dlq"},
		{Kind: engine.ChangeReplayedElsewhere, Messages: 1, Detail: "1 previewed message(s) were sent by another replay after this preview"},
		{Kind: engine.ChangeTargetDeleted, Queue: "payments.settle", Messages: 5, Detail: "target queue payments.settle was deleted since the preview"},
		{Kind: engine.ChangeHeldByReplay, Messages: 120, Replay: "r_feedc0ffee123456", Detail: "120 previewed message(s) are being sent by replay r_feedc0ffee123456 now"},
		{Kind: engine.ChangeHeldByReplay, Messages: 30, Replay: "r_0123456789abcdef", Owned: true, Detail: "30 previewed message(s) belong to replay r_0123456789abcdef"},
	}
}

func checkWithGroups() engine.CheckReport {
	return engine.CheckReport{
		ReplayID: replayID, DLQ: "orders.dlq", At: fixedNow(), Replayed: 1000, Returned: 14,
		Groups: []engine.CheckGroup{
			{Group: "order <n> not found", Type: "rejected", Count: 11, ExampleID: "a1b2c3d4e5f60718", Reason: "rejected", Example: "order 4711 not found"},
			{Group: "com.acme.KycException: KYC failed for customer John Roe, email john.roe@example.com, diagnosis <n>", Type: "com.acme.KycException", Count: 2, ExampleID: "1a2b3c4d5e6f7081", Reason: "rejected",
				Example: "KYC failed for customer John Roe, email john.roe@example.com, diagnosis 17"},
			{Group: "rejected", Type: "rejected", Count: 1, ExampleID: "0f1e2d3c4b5a6978", Reason: "rejected"},
		},
		NewFailures: 5, AtParkLimit: 2, ParkIDs: []string{"a1b2c3d4e5f60718", "0f1e2d3c4b5a6978"}, ParkAfter: 3, Label: "+5m",
	}
}

func checkNothingBack() engine.CheckReport {
	return engine.CheckReport{ReplayID: replayID, DLQ: "orders.dlq", At: fixedNow(), Replayed: 1000, Groups: []engine.CheckGroup{}, ParkAfter: 3, Label: "+2h"}
}

// checkHeldByReplay is a check made while another replay's read held
// 1,700 messages of the DLQ, none of its copies seen back.
func checkHeldByReplay() engine.CheckReport {
	c := checkNothingBack()
	c.Replayed, c.Label = 10, ""
	c.HeldByReplay = &engine.HeldBy{Replays: []string{"r_0ld0000000000000"}, Messages: 1700}
	return c
}

// unseen is a window without the tap that could not be re-read: 3
// seconds, 392 copies.
func unseen() *engine.Unseen {
	return &engine.Unseen{Count: 392, From: fixedNow().Add(-40 * time.Minute), To: fixedNow().Add(-40*time.Minute + 3*time.Second)}
}

// checkUnseen is a follow-up that could not tell for some copies.
func checkUnseen() engine.CheckReport {
	c := checkNothingBack()
	c.Replayed, c.Unseen = 400, unseen()
	c.Unseen.Count = 400
	return c
}

// finishedUnseen is a replay that finished while its tap was gone for a
// while and its DLQ could not be re-read.
func finishedUnseen() (engine.Replay, *engine.StepResult) {
	r := replay(engine.StateFinished)
	r.Total, r.Sent, r.Settled, r.Step, r.EndedAt, r.Unseen = 400, 400, 400, 6, fixedNow(), unseen()
	r.Note = "400 sent, 400 settled, 0 seen back, " + r.Unseen.Words() + ", 0 missing, 0 not delivered"
	u := *r.Unseen
	st := &engine.StepResult{Step: 6, Planned: 90, Sent: 90, Settled: 90, Unseen: &u, Duration: 4 * time.Second,
		Observation: "all 90 settled; " + u.Words()}
	return r, st
}
