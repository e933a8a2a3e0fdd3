package blocks

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// longName is a 255-byte queue name full of characters that need escaping
// or break formatting.
func longName(i int) string {
	s := fmt.Sprintf("q%d-<@U1>&`*_~", i) + strings.Repeat("ö", 127)
	for len(s) > 255 {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}

// bigPreview builds a preview of distinct messages bound for targets
// queues, with 10 KB exception texts and payloads and a problem per target.
func bigPreview(distinct, targets int) *engine.Preview {
	long := strings.Repeat("<&>`x\n", 10*1024/6)
	p := &engine.Preview{
		Token: "p_" + strings.Repeat("A", 22), ExpiresAt: fixedNow().Add(time.Hour).Format(time.RFC3339),
		DLQ:       engine.QueueInfo{Name: longName(-1), Exists: true, Type: "quorum"},
		Selection: longName(-2) + " exception=" + long, Requester: long,
		Scanned: distinct * 3, Selected: distinct * 2, Distinct: distinct, Parked: distinct,
	}
	for i := range targets {
		q := longName(i)
		p.Targets = append(p.Targets, engine.TargetView{Queue: q, Exists: i%3 != 0, Consumers: i % 2, Messages: distinct / targets,
			Reasons: map[engine.Reason]int{"rejected": 1, "expired": 2, "maxlen": 3, engine.Reason(long): 4}})
		kind := engine.ProblemTargetMissing
		if i%2 == 1 {
			kind = engine.ProblemNoConsumers
		}
		p.Problems = append(p.Problems, engine.Problem{Kind: kind, Queue: q, Messages: i, Detail: long})
	}
	for i := range 1000 {
		p.Problems = append(p.Problems, engine.Problem{Kind: engine.ProblemKind(fmt.Sprintf("new_kind_%d", i%50) + long[:100]), Messages: i, Detail: long})
	}
	for _, k := range []engine.ProblemKind{engine.ProblemNoTarget, engine.ProblemAlreadyReplayed, engine.ProblemParked, engine.ProblemDeliveryLimit, engine.ProblemUnreadable} {
		p.Problems = append(p.Problems, engine.Problem{Kind: k, Queue: longName(0), Messages: distinct, Detail: long})
	}
	p.Messages = make([]engine.PreviewMessage, distinct)
	for i := range p.Messages {
		m := engine.Meta{ID: fmt.Sprintf("%016x", i), Reason: engine.Reason(long[:300]), Exception: long, ExceptionType: long,
			SourceNote: long, Problems: []string{long, long}, Dialect: engine.Dialect(long[:50]), ReplayID: long}
		if i < 10 {
			m.Excerpt = long
		}
		p.Messages[i] = engine.PreviewMessage{Meta: m, Count: i + 1, Target: longName(i % max(targets, 1)), Parked: i%7 == 0,
			Replayed: []engine.Sent{{ReplayID: long, At: fixedNow(), Approver: long}, {ReplayID: "r_x"}}}
	}
	return p
}

// mustValidate fails t when a rendered message breaks Slack's limits or its
// fallback text is too long.
func mustValidate(t *testing.T, name string, b []slack.Block, text string) {
	t.Helper()
	if err := Validate(b); err != nil {
		t.Errorf("%s: %v", name, err)
	}
	if n := utf8.RuneCountInString(text); n > MaxFallbackText || n == 0 {
		t.Errorf("%s: fallback text of %d characters", name, n)
	}
}

func TestLimitsPreview(t *testing.T) {
	for _, distinct := range []int{1, 10, 1000, 100_000} {
		for _, targets := range []int{1, 10, 5000} {
			p := bigPreview(distinct, targets)
			name := fmt.Sprintf("%d messages, %d targets", distinct, targets)
			b, text := Preview(p, fixedNow())
			mustValidate(t, name, b, text)
			sb, st := Samples(p)
			mustValidate(t, name+" samples", sb, st)
			mustValidate(t, name+" approved", rendered(PreviewApproved(p, p.Requester, p.Requester)).blocks, "x")
			mustValidate(t, name+" discarded", rendered(PreviewDiscarded(p, p.Requester)).blocks, "x")
			mustValidate(t, name+" approved from blocks", Approved(b, "U012ABCDEF", replayID), "x")
			p.Token = ""
			b, text = Preview(p, fixedNow())
			mustValidate(t, name+" without token", b, text)
		}
	}
}

func TestLimitsProgress(t *testing.T) {
	long := strings.Repeat("<&>`y\n", 10*1024/6)
	r := replay(engine.StateStopped)
	r.ID, r.DLQ, r.Note, r.Approver, r.Requester = long, longName(1), long, long, long
	r.Returned, r.Failed, r.Missing = 10_000, 5000, 5000
	for i := range 10_000 {
		kind := engine.FailureReturned
		if i%3 == 0 {
			kind = []engine.FailureKind{engine.FailureUnroutable, engine.FailureNacked, engine.FailureMissing, engine.FailureInDoubt}[i%4]
		}
		r.Failures = append(r.Failures, engine.Failure{ID: long, Target: longName(i), Kind: kind, Reason: long, Detail: long})
	}
	r.RestSelection = long
	step := &engine.StepResult{Step: 1 << 30, Planned: 1 << 30, Sent: 1, Observation: long, Duration: time.Hour}
	for _, s := range []engine.State{engine.StateQueued, engine.StateRunning, engine.StatePaused, engine.StateStopped,
		engine.StateCancelled, engine.StateFinished, engine.StateInterrupted, engine.State(long)} {
		r.State = s
		b, text := Progress(r, step)
		mustValidate(t, "progress "+string(s)[:min(len(s), 20)], b, text)
		b, text = ProgressEvent(engine.Event{Kind: engine.EventInterrupted, Replay: r, Step: step, Text: long})
		mustValidate(t, "progress event "+string(s)[:min(len(s), 20)], b, text)
		for _, k := range []engine.EventKind{engine.EventStarted, engine.EventStepStarted, engine.EventStepPassed, engine.EventStopped,
			engine.EventPaused, engine.EventResumed, engine.EventCancelled, engine.EventFinished, engine.EventInterrupted} {
			for _, st := range []*engine.StepResult{nil, step} {
				e := engine.Event{Kind: k, Replay: r, Step: st, Text: long}
				for _, line := range []string{StepReply(e), Activity(e)} {
					if utf8.RuneCountInString(line) > maxLine || strings.Contains(line, "\n") {
						t.Errorf("%s: line of %d characters or with a line break", k, utf8.RuneCountInString(line))
					}
				}
			}
		}
	}
}

func TestLimitsChecksChangesErrors(t *testing.T) {
	long := strings.Repeat("<&>`z\n", 10*1024/6)
	c := engine.CheckReport{ReplayID: "r_" + strings.Repeat("f", 16), DLQ: longName(2), At: fixedNow(), Replayed: 1 << 40, Returned: 10_000,
		NewFailures: 1 << 40, AtParkLimit: 10_000, ParkAfter: 3, Label: long}
	for i := range 10_000 {
		c.Groups = append(c.Groups, engine.CheckGroup{Group: long, Count: i, ExampleID: long, Reason: long, Example: long + "!"})
		c.ParkIDs = append(c.ParkIDs, long)
	}
	b, text := Check(c, PrivateView)
	mustValidate(t, "check", b, text)
	for i := range c.Groups {
		c.Groups[i].Type = long
	}
	b, text = Check(c, ChannelView)
	mustValidate(t, "check (channel)", b, text)
	if line := ActivityCheck(c); utf8.RuneCountInString(line) > maxLine {
		t.Errorf("activity check line of %d characters", utf8.RuneCountInString(line))
	}

	var cs []engine.Change
	for i := range 10_000 {
		cs = append(cs, engine.Change{Kind: []engine.ChangeKind{engine.ChangeTargetDeleted, engine.ChangeConsumersGone, engine.ChangeMessagesGone, engine.ChangeReplayedElsewhere, engine.ChangeKind(long)}[i%5],
			Queue: longName(i), Messages: i, Detail: long})
	}
	b, text = Changes(cs, "p_"+strings.Repeat("B", 22))
	mustValidate(t, "changes", b, text)
	b, text = Changes(nil, "")
	mustValidate(t, "no changes", b, text)

	b, text = Error(long)
	mustValidate(t, "error", b, text)
	b, text = Error("")
	mustValidate(t, "empty error", b, text)
	b, text = Preview(nil, fixedNow())
	mustValidate(t, "nil preview", b, text)
}

// TestValidateCatches checks that Validate reports each limit it guards.
func TestValidateCatches(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	many := make([]slack.Block, MaxBlocks+1)
	for i := range many {
		many[i] = slack.NewDividerBlock()
	}
	btn := func(label, value, action string) slack.Block {
		return slack.NewActionBlock("", slack.NewButtonBlockElement(action, value, slack.NewTextBlockObject(slack.PlainTextType, label, false, false)))
	}
	tenPlus := make([]*slack.TextBlockObject, MaxFields+1)
	for i := range tenPlus {
		tenPlus[i] = slack.NewTextBlockObject(slack.MarkdownType, "f", false, false)
	}
	cases := map[string][]slack.Block{
		"too many blocks": many,
		"long section":    {section(long(10)), slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, long(MaxSectionText+1), false, false), nil, nil)},
		"empty section":   {slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "", false, false), nil, nil)},
		"too many fields": {slack.NewSectionBlock(nil, tenPlus, nil)},
		"long field":      {slack.NewSectionBlock(nil, []*slack.TextBlockObject{slack.NewTextBlockObject(slack.MarkdownType, long(MaxFieldText+1), false, false)}, nil)},
		"long header":     {slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, long(MaxHeaderText+1), false, false))},
		"long label":      {btn(long(MaxButtonText+1), "v", ActionPark)},
		"long value":      {btn("ok", long(MaxButtonValue+1), ActionPark)},
		"long action id":  {btn("ok", "v", long(MaxActionID+1))},
		"duplicate ids":   {contextBlock("same", "a"), contextBlock("same", "b")},
		"long block id":   {contextBlock(long(MaxBlockID+1), "a")},
		"long confirm": {actions("", button(ActionCancel, "v", "Cancel", "",
			slack.NewConfirmationBlockObject(plain("t", 10), slack.NewTextBlockObject(slack.PlainTextType, long(MaxConfirmText+1), false, false), plain("y", 10), plain("n", 10))))},
		"duplicate action": {actions("", button(ActionPause, "v", "a", "", nil), button(ActionPause, "v", "b", "", nil))},
	}
	for name, b := range cases {
		if Validate(b) == nil {
			t.Errorf("%s: Validate found nothing wrong", name)
		}
	}
	if err := Validate(nil); err != nil {
		t.Errorf("empty message: %v", err)
	}
}

func TestTextHelpers(t *testing.T) {
	if got := esc("a&b", 4); got != "a…" {
		t.Errorf("esc cut inside an entity: %q", got)
	}
	if got := code("x`y\nz", 20); got != "`xˋy z`" {
		t.Errorf("code = %q", got)
	}
	if got := num(-1234567); got != "-1,234,567" {
		t.Errorf("num = %q", got)
	}
	if got := bar(3, 10, 10); got != "▰▰▰▱▱▱▱▱▱▱ 30%" {
		t.Errorf("bar = %q", got)
	}
	if got := bar(999, 1000, 10); !strings.HasSuffix(got, " 99%") {
		t.Errorf("bar shows 100%% before the end: %q", got)
	}
	if got := who("U012ABCDEF"); got != "<@U012ABCDEF>" {
		t.Errorf("who = %q", got)
	}
	if got := who("<!channel>"); got != "&lt;!channel&gt;" {
		t.Errorf("who does not escape: %q", got)
	}
	if got := clip("héllo", 3); got != "hé…" {
		t.Errorf("clip = %q", got)
	}
}
