package blocks

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

var update = flag.Bool("update", false, "rewrite golden files")

// render is one rendered message: its blocks and fallback text.
type render struct {
	blocks []slack.Block
	text   string
}

func rendered(b []slack.Block, text string) render { return render{b, text} }

// goldenCases are the messages kept in testdata/*.golden.
func goldenCases() map[string]render {
	stopped, stoppedStep := stoppedReplay()
	paused := replay(engine.StatePaused)
	paused.Note = "paused by an operator"
	inDoubt := replay(engine.StateStopped)
	inDoubt.Sent, inDoubt.InDoubt, inDoubt.Duplicates = inDoubt.Total-120, 120, 35
	inDoubt.Note = engine.Shortfall(inDoubt)
	resent := finishedReplay()
	resent.Resent, resent.Duplicates = 120, 35
	// Another reader took originals after the loss: counted again where
	// reads are free, the last count standing where they are not.
	taken := inDoubt
	taken.InDoubtTaken = 20
	taken.Note = engine.Shortfall(taken)
	stale := inDoubt
	stale.CountStale = true
	stale.Note = engine.Shortfall(stale)
	// Finished after Continue anyway with copies back; stopped with
	// nothing left to send.
	finishedBack := finishedReplay()
	finishedBack.Returned = 12
	for i := range 2 {
		finishedBack.Failures = append(finishedBack.Failures, engine.Failure{ID: fmt.Sprintf("%016x", 0xbee000+i), Target: "orders.created", Kind: engine.FailureReturned, Reason: "rejected"})
	}
	stoppedEnd, _ := stoppedReplay()
	stoppedEnd.Total, stoppedEnd.Sent, stoppedEnd.Failed = 30, 29, 1
	cancelled := replay(engine.StateCancelled)
	cancelled.EndedAt = fixedNow()
	queued := replay(engine.StateQueued)
	queued.Sent, queued.Settled, queued.Step = 0, 0, 0
	links := ReplayLinks("https://acme.slack.com", "C0123456789", "1700000000.000100", "https://dlqbot.example.com", replayID)
	approvedPreview, _ := Preview(previewWithProblems(), fixedNow())
	approvedPreview = Approved(approvedPreview, approver, replayID)
	frozenHeader := engine.Frozen{Token: "p_frozen", DLQ: "orders.dlq", Selection: "orders.dlq reason=rejected",
		Requester: "U0REQUEST1", Total: 1200, Distinct: 1180, ItemTargets: []string{"orders", "orders.retry"}}
	return map[string]render{
		"progress_finished_came_back":   rendered(Progress(finishedBack, nil)),
		"progress_stopped_nothing_left": rendered(Progress(stoppedEnd, nil)),
		"progress_cancelled":            rendered(Progress(cancelled, nil)),
		"preview_status_running":        rendered(PreviewStatus(approvedPreview, replay(engine.StateRunning), links)),
		"preview_status_paused":         rendered(PreviewStatus(approvedPreview, paused, links)),
		"preview_status_stopped":        rendered(PreviewStatus(approvedPreview, stopped, links)),
		"preview_status_finished":       rendered(PreviewStatus(approvedPreview, finishedReplay(), links)),
		"preview_status_came_back":      rendered(PreviewStatus(approvedPreview, finishedBack, links)),
		"preview_status_unseen":         rendered(PreviewStatus(nil, func() engine.Replay { r, _ := finishedUnseen(); return r }(), Links{})),
		"preview_status_cancelled":      rendered(PreviewStatus(approvedPreview, cancelled, links)),
		"preview_status_queued":         rendered(PreviewStatus(approvedPreview, queued, links)),
		"preview_status_interrupted":    rendered(PreviewStatus(approvedPreview, interruptedEvent().Replay, links)),
		"progress_queued":               rendered(Progress(queued, nil)),
		"preview_status_frozen":         rendered(PreviewStatus(FrozenPreview(frozenHeader), stopped, links)),
		"preview_status_frozen_card":    rendered(PreviewStatus(FrozenPreview(frozenOf(previewArrivals())), stopped, links)),
		"preview_details":               rendered(PreviewDetails(previewWithBudget())),
		"preview_details_arrivals":      rendered(PreviewDetails(previewArrivals())),
		"progress_in_doubt":             rendered(Progress(inDoubt, nil)),
		"progress_in_doubt_taken":       rendered(Progress(taken, nil)),
		"progress_in_doubt_stale":       rendered(Progress(stale, nil)),
		"progress_resent":               rendered(Progress(resent, nil)),
		"preview_problems":              rendered(Preview(previewWithProblems(), fixedNow())),
		"preview_unchanged":             rendered(Preview(previewUnchanged(), fixedNow())),
		"preview_nothing":               rendered(Preview(previewNothing(), fixedNow())),
		"preview_samples":               rendered(Samples(previewWithProblems())),
		"preview_arrivals":              rendered(Preview(previewArrivals(), fixedNow())),
		"preview_arrivals_src":          rendered(Preview(previewArrivalsBySource(), fixedNow())),
		"preview_approved":              rendered(PreviewApproved(previewWithProblems(), approver, replayID)),
		"preview_discarded":             rendered(PreviewDiscarded(previewWithProblems(), asker)),
		"progress_running":              rendered(Progress(replay(engine.StateRunning), lastStep())),
		"progress_paused":               rendered(Progress(paused, lastStep())),
		"progress_stopped":              rendered(Progress(stopped, stoppedStep)),
		"progress_finished":             rendered(Progress(finishedReplay(), nil)),
		"progress_interrupted":          rendered(ProgressEvent(interruptedEvent())),
		"changes":                       rendered(Changes(changes(), token)),
		"check_groups_park":             rendered(Check(checkWithGroups(), ChannelView)),
		"check_groups_private":          rendered(Check(checkWithGroups(), PrivateView)),
		"check_nothing_back":            rendered(Check(checkNothingBack(), ChannelView)),
		"check_unseen":                  rendered(Check(checkUnseen(), ChannelView)),
		"check_held_by_replay":          rendered(Check(checkHeldByReplay(), PrivateView)),
		"preview_targets_cut":           rendered(Preview(previewManyTargets(), fixedNow())),
		"preview_targets_private":       rendered(Samples(previewManyTargets())),
		"progress_unseen":               rendered(Progress(finishedUnseen())),
		"alert_open":                    rendered(Alert(watchAlert(ops.AlertOpen))),
		"alert_open_groups":             rendered(Alert(alertWithGroups())),
		"alert_resolved":                rendered(Alert(watchAlert(ops.AlertResolved))),
		"alert_snoozed":                 rendered(Alert(watchAlert(ops.AlertSnoozed))),
		"error":                         rendered(Error("Token p_xyz has expired. Run `/dlq preview orders.dlq` again <@here>.")),
	}
}

// marshal writes the golden form of a message: its fallback text, then
// its blocks as indented JSON (without HTML escaping, for readability).
func marshal(t *testing.T, r render) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("-- text --\n" + r.text + "\n-- blocks --\n")
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r.blocks); err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return buf.Bytes()
}

func TestGolden(t *testing.T) {
	for name, r := range goldenCases() {
		t.Run(name, func(t *testing.T) {
			if err := Validate(r.blocks); err != nil {
				t.Errorf("Validate: %v", err)
			}
			got := marshal(t, r)
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./blocks -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the rendering (go test ./blocks -update rewrites it)\n--- got\n%s", path, got)
			}
		})
	}
}

// lifecycleEvents are the events of a replay's life the golden file
// keeps the lines of.
func lifecycleEvents() []engine.Event {
	stopped, stoppedStep := stoppedReplay()
	passed := replay(engine.StateRunning)
	return []engine.Event{
		{Kind: engine.EventStarted, Replay: replay(engine.StateRunning), Text: "replay started"},
		{Kind: engine.EventStepStarted, Replay: passed, Step: &engine.StepResult{Step: 3, Planned: 40}},
		{Kind: engine.EventStepPassed, Replay: passed, Step: lastStep()},
		{Kind: engine.EventStopped, Replay: stopped, Step: stoppedStep},
		{Kind: engine.EventPaused, Replay: replay(engine.StatePaused)},
		{Kind: engine.EventResumed, Replay: replay(engine.StateRunning)},
		{Kind: engine.EventCancelled, Replay: replay(engine.StateCancelled)},
		{Kind: engine.EventCancelled, Replay: cancelledAfterGrace()},
		{Kind: engine.EventFinished, Replay: finishedReplay()},
		interruptedEvent(),
		takenFromEvent(),
	}
}

// TestEventLinesGolden keeps every thread reply and activity line in one
// golden file.
func TestEventLinesGolden(t *testing.T) {
	var buf bytes.Buffer
	for _, e := range lifecycleEvents() {
		reply, activity := StepReply(e), Activity(e)
		for _, l := range []string{reply, activity} {
			if strings.Contains(l, "\n") {
				t.Errorf("%s: line has a line break: %q", e.Kind, l)
			}
		}
		buf.WriteString("-- " + string(e.Kind) + " --\nreply:    " + reply + "\nactivity: " + activity + "\n")
	}
	buf.WriteString("-- check --\nactivity: " + ActivityCheck(checkWithGroups()) + "\n")
	held := checkWithGroups()
	held.HeldByReplay = &engine.HeldBy{Replays: []string{"r_0ld0000000000000"}, Messages: 400}
	buf.WriteString("-- check beside a replay --\nactivity: " + ActivityCheck(held) + "\n")
	buf.WriteString("-- check, nothing back --\nactivity: " + ActivityCheck(checkNothingBack()) + "\n")
	buf.WriteString("-- check, tap gone --\nactivity: " + ActivityCheck(checkUnseen()) + "\n")
	for _, e := range unseenEvents() {
		buf.WriteString("-- tap gone, " + string(e.Kind) + " --\nreply: " + StepReply(e) + "\nactivity: " + Activity(e) + "\n")
	}
	path := filepath.Join("testdata", "event_lines.golden")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./blocks -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs (go test ./blocks -update rewrites it)\n--- got\n%s", path, buf.Bytes())
	}
}

// TestRoundTrip checks that slack-go reads every rendered message back (as
// the bot or the local stand-in would) and that it is still valid.
func TestRoundTrip(t *testing.T) {
	for name, r := range goldenCases() {
		raw, err := json.Marshal(slack.Blocks{BlockSet: r.blocks})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var back slack.Blocks
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("%s: unmarshal: %v", name, err)
		}
		if len(back.BlockSet) != len(r.blocks) {
			t.Errorf("%s: %d blocks back, want %d", name, len(back.BlockSet), len(r.blocks))
		}
		if err := Validate(back.BlockSet); err != nil {
			t.Errorf("%s: after a round trip: %v", name, err)
		}
	}
}

// TestCheckNeverSaysProcessed holds the check's wording: copies not back are "not
// seen in a dead-letter queue", never "processed".
func TestCheckNeverSaysProcessed(t *testing.T) {
	for _, c := range []engine.CheckReport{checkWithGroups(), checkNothingBack(), {ReplayID: replayID}} {
		out := string(marshal(t, rendered(Check(c, ChannelView)))) + ActivityCheck(c)
		if strings.Contains(strings.ToLower(out), "processed") {
			t.Errorf("check report says processed:\n%s", out)
		}
		if c.Replayed > 0 && !strings.Contains(out, "not seen in a dead-letter queue") {
			t.Errorf("check report does not say \"not seen in a dead-letter queue\":\n%s", out)
		}
	}
}

// unseenEvents are a step and a finish of a replay whose tap was gone
// for a while.
func unseenEvents() []engine.Event {
	ur, ust := finishedUnseen()
	return []engine.Event{
		{Kind: engine.EventStepPassed, Replay: ur, At: fixedNow(), Step: ust},
		{Kind: engine.EventFinished, Replay: ur, At: fixedNow()},
	}
}

// takenFromEvent starts a replay whose approval took over 30 messages a
// stopped replay owned and had not sent.
func takenFromEvent() engine.Event {
	r := replay(engine.StateRunning)
	r.TakenFrom = map[string]int{"r_0ld0000000000000": 30}
	return engine.Event{Kind: engine.EventStarted, Replay: r, Text: "replay started"}
}

// watchAlert is orders.eu.dlq's alert in state: 30 arrived over two
// minutes; resolved by one replay; snoozed by a user.
func watchAlert(state string) ops.Alert {
	opened := fixedNow().Add(-10 * time.Minute)
	a := ops.Alert{AlertRecord: ops.AlertRecord{ID: "a_1", DLQ: "orders.eu.dlq", Channel: "C0INCIDENT", TS: "1700000000.000100",
		Opened: opened, Baseline: 2, Arrived: 30, Edited: opened}, State: state, Depth: 32, Within: 5 * time.Minute,
		PerMinute: 15, Depths: []int{2, 2, 2, 5, 12, 20, 32}, Threshold: 10}
	switch state {
	case ops.AlertResolved:
		a.Depth, a.Ended, a.Replays = 0, fixedNow(), []string{replayID}
		a.Depths = append(a.Depths, 16, 0)
	case ops.AlertSnoozed:
		a.Ended, a.By, a.Until = fixedNow(), "U012ALICE", fixedNow().Add(time.Hour)
	}
	return a
}

// alertWithGroups is an open alert of a DLQ whose latest whole preview
// saw four failure groups.
func alertWithGroups() ops.Alert {
	a := watchAlert(ops.AlertOpen)
	a.Seen = engine.CardOf(previewArrivals()).Arrivals
	a.Seen.Groups = append(a.Seen.Groups, engine.ArrivalRow{GroupID: "g0123456789ab", Messages: 2})
	a.Seen.MoreGroups = 4
	return a
}

// previewWithBudget is previewWithProblems with its quorum DLQ's read
// budget.
func previewWithBudget() *engine.Preview {
	p := previewWithProblems()
	p.Budget = &engine.BudgetView{Limit: 20, LimitFrom: "RabbitMQ 4's default for quorum queues", DeliveryCount: 2, ReadsLeft: 18, ReadsNeeded: 7, Steps: 3}
	p.Returns = engine.ReturnsView{Mode: engine.ReturnsTap, Tap: "dlqbot.tap.orders.dlq", Detail: "returns will be found by the tap dlqbot.tap.orders.dlq, bound to the DLQ's dead-letter exchange"}
	return p
}
