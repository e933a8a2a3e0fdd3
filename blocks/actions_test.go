package blocks

import (
	"reflect"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// btn is what a test needs to know about a rendered button.
type btn struct {
	action, value string
	confirm       bool
}

// buttons lists every button in a message, in order.
func buttons(bs []slack.Block) []btn {
	var out []btn
	for _, b := range bs {
		if s, ok := b.(*slack.SectionBlock); ok && s.Accessory != nil && s.Accessory.ButtonElement != nil {
			e := s.Accessory.ButtonElement
			out = append(out, btn{e.ActionID, e.Value, e.Confirm != nil})
		}
		a, ok := b.(*slack.ActionBlock)
		if !ok {
			continue
		}
		for _, e := range a.Elements.ElementSet {
			if b, ok := e.(*slack.ButtonBlockElement); ok {
				out = append(out, btn{b.ActionID, b.Value, b.Confirm != nil})
			}
		}
	}
	return out
}

func TestActionIDs(t *testing.T) {
	// These names are fixed (SPEC §10); other tools rely on them.
	for got, want := range map[string]string{
		ActionApprove: "dlq.approve", ActionDiscard: "dlq.discard", ActionPause: "dlq.pause",
		ActionResume: "dlq.resume", ActionCancel: "dlq.cancel", ActionPark: "dlq.park",
		ActionPreviewGroup: "dlq.preview_group", ActionPreviewReturned: "dlq.preview_returned",
	} {
		if got != want {
			t.Errorf("action id %q, want %q", got, want)
		}
	}
}

func TestButtons(t *testing.T) {
	progress := func(s engine.State) []slack.Block {
		r := replay(s)
		b, _ := Progress(r, nil)
		return b
	}
	first := func(b []slack.Block, _ string) []slack.Block { return b }
	approve := btn{"dlq.approve", token, true}
	discard := btn{"dlq.discard", token, false}
	samples := btn{"dlq.samples", token, false}
	details := btn{"dlq.details", token, false}
	pause := btn{"dlq.pause", replayID, false}
	resume := btn{"dlq.resume", replayID, false}
	cont := btn{"dlq.resume", replayID, true}
	cancel := btn{"dlq.cancel", replayID, true}
	cases := []struct {
		name string
		b    []slack.Block
		want []btn
	}{
		{"preview", first(Preview(previewWithProblems(), fixedNow())), []btn{approve, discard, samples, details}},
		{"preview, nothing selected", first(Preview(previewNothing(), fixedNow())), nil},
		{"preview approved", first(PreviewApproved(previewWithProblems(), approver, replayID)), nil},
		{"preview discarded", first(PreviewDiscarded(previewWithProblems(), approver)), nil},
		{"preview approved from blocks", Approved(first(Preview(previewWithProblems(), fixedNow())), approver, replayID), nil},
		{"queued", progress(engine.StateQueued), []btn{pause, cancel}},
		{"running", progress(engine.StateRunning), []btn{pause, cancel}},
		{"paused", progress(engine.StatePaused), []btn{resume, cancel}},
		{"stopped", progress(engine.StateStopped), []btn{cont, cancel}},
		{"finished", progress(engine.StateFinished), nil},
		{"cancelled", progress(engine.StateCancelled), nil},
		{"interrupted", progress(engine.StateInterrupted), nil},
		{"changes", first(Changes(changes(), token)), []btn{{"dlq.approve", token + ":confirm:" + engine.ChangesDigest(changes()), true}, discard}},
		{"check with park", first(Check(checkWithGroups(), ChannelView)), []btn{
			{"dlq.preview_group", "orders.dlq replayed_by=" + replayID + " group=" + engine.GroupID("order <n> not found"), false},
			{"dlq.preview_group", "orders.dlq replayed_by=" + replayID + " group=" + engine.GroupID(checkWithGroups().Groups[1].Group), false},
			{"dlq.preview_group", "orders.dlq replayed_by=" + replayID + " group=" + engine.GroupID("rejected"), false},
			{"dlq.preview_returned", "orders.dlq replayed_by=" + replayID, false},
			{"dlq.park", replayID, true}}},
		{"preview with arrivals", first(Preview(previewArrivals(), fixedNow())), []btn{
			{"dlq.preview_group", "orders.dlq reason=rejected group=" + engine.GroupID("order <n> not found"), false},
			{"dlq.preview_group", "orders.dlq reason=rejected group=" + previewArrivals().Arrivals.Groups[1].GroupID, false},
			approve, discard, samples, details}},
		{"preview with arrivals by source", first(Preview(previewArrivalsBySource(), fixedNow())), nil},
		{"check, nothing back", first(Check(checkNothingBack(), ChannelView)), nil},
	}
	for _, c := range cases {
		if got := buttons(c.b); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: buttons %+v, want %+v", c.name, got, c.want)
		}
	}
	// The stopped replay's resume button says what it does.
	for _, b := range progress(engine.StateStopped) {
		if a, ok := b.(*slack.ActionBlock); ok {
			if l := a.Elements.ElementSet[0].(*slack.ButtonBlockElement).Text.Text; l != "Continue anyway" {
				t.Errorf("stopped replay's resume button reads %q", l)
			}
		}
	}
}

func TestApproveValue(t *testing.T) {
	for _, digest := range []string{"", "0123456789abcdef"} {
		v := ApproveValue(token, digest)
		tok, d := ParseApproveValue(v)
		if tok != token || d != digest {
			t.Errorf("ParseApproveValue(%q) = %q, %q; want %q, %q", v, tok, d, token, digest)
		}
	}
	if v := ApproveValue(token, "0123456789abcdef"); !strings.HasPrefix(v, token) || v == token {
		t.Errorf("confirmed value %q", v)
	}
	if tok, d := ParseApproveValue(" " + token + "\n"); tok != token || d != "" {
		t.Errorf("ParseApproveValue with spaces = %q, %q", tok, d)
	}
	// A button that carried no digest confirms no change.
	if tok, d := ParseApproveValue(token + ":confirm"); tok != token || d != "" {
		t.Errorf("ParseApproveValue without a digest = %q, %q", tok, d)
	}
}

// TestApprovedKeepsSummary checks that editing a posted preview keeps its
// summary and drops only the buttons and the expiry.
func TestApprovedKeepsSummary(t *testing.T) {
	b, _ := Preview(previewWithProblems(), fixedNow())
	got := Approved(b, approver, replayID)
	if len(got) != len(b)-1 { // -actions -expiry +outcome
		t.Errorf("%d blocks after approval, want %d", len(got), len(b)-1)
	}
	for _, x := range got {
		if x.ID() == BlockPreviewExpiry || x.BlockType() == slack.MBTAction {
			t.Errorf("block %q kept after approval", x.ID())
		}
	}
	if last := got[len(got)-1]; last.ID() != BlockPreviewOutcome {
		t.Errorf("last block %q, want the outcome", last.ID())
	}
	// Approving twice (a retried edit) still shows one outcome line.
	if again := Approved(got, approver, replayID); len(again) != len(got) {
		t.Errorf("approving again: %d blocks, want %d", len(again), len(got))
	}
}
