package blocks

import (
	"fmt"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// maxChanges caps the changes listed one by one.
const maxChanges = 10

// Changes renders "what changed since the preview", shown when
// an approval found the DLQ or its targets changed: nothing has been sent.
// Its "Approve anyway" button (dlq.approve, value ApproveValue(token,
// engine.ChangesDigest(changes))) approves despite exactly these changes; Discard (dlq.discard) drops the
// token.
func Changes(changes []engine.Change, token string) ([]slack.Block, string) {
	lines := make([]string, 0, maxChanges)
	for _, c := range changes[:min(len(changes), maxChanges)] {
		lines = append(lines, changeLine(c))
	}
	head := ":warning: *The DLQ or its targets changed since the preview.* Nothing has been sent yet."
	text := list(head, lines, len(changes), MaxSectionText, func(n int) string {
		return "…and " + plural(n, "more change", "more changes")
	})
	out := []slack.Block{section(text)}
	if token == "" {
		return out, changesText(changes)
	}
	out = append(out,
		contextBlock("", "Approve anyway to replay what is still there, in canary steps as before, or discard the preview and make a new one."),
		actions(BlockChangesActions,
			button(ActionApprove, ApproveValue(token, engine.ChangesDigest(changes)), "Approve anyway", slack.StyleDanger,
				confirm("Replay despite the changes?",
					fmt.Sprintf("%s since the preview apply to this replay. It still runs in canary steps and stops by itself if any come back.", plural(len(changes), "change", "changes")),
					"Replay anyway", "Not yet", slack.StyleDanger)),
			button(ActionDiscard, token, "Discard", "", nil),
		),
	)
	return out, changesText(changes)
}

// changeLine words one change.
func changeLine(c engine.Change) string {
	q := code(c.Queue, 120)
	switch c.Kind {
	case engine.ChangeTargetDeleted:
		return fmt.Sprintf(":x: *Target deleted* — %s was deleted since the preview: its %s would not be delivered and stay in the DLQ.", q, msgs(c.Messages))
	case engine.ChangeConsumersGone:
		return fmt.Sprintf(":warning: *Consumers gone* — %s had consumers at the preview and has none now: its %s would wait there, and the replay would stop after its first step.", q, msgs(c.Messages))
	case engine.ChangeMessagesGone:
		return fmt.Sprintf(":ghost: *Messages gone* — %s %s no longer in %s (consumed, moved or replayed since); they would be reported missing.", plural(c.Messages, "previewed message", "previewed messages"), isAre(c.Messages), q)
	case engine.ChangeHeldByReplay:
		if c.Owned && c.TakeOver {
			return fmt.Sprintf(":handshake: *Taken over* — %s %s to replay %s (approved first, not sent yet): this approval takes %s over, so this replay sends %s and %s will not.", plural(c.Messages, "previewed message", "previewed messages"), belongs(c.Messages), code(c.Replay, 80), pick(c.Messages, "it", "them"), pick(c.Messages, "it", "them"), code(c.Replay, 80))
		}
		if c.Owned {
			return fmt.Sprintf(":handshake: *Owned by another replay* — %s %s to replay %s (approved first, not sent yet): approved, this replay leaves %s to it and sends only the rest; approve with `takeover=yes` to send %s from this one.", plural(c.Messages, "previewed message", "previewed messages"), belongs(c.Messages), code(c.Replay, 80), pick(c.Messages, "it", "them"), pick(c.Messages, "it", "them"))
		}
		return fmt.Sprintf(":handshake: *Being replayed* — %s %s being sent by replay %s now: approved, this replay leaves %s to it and sends only the rest.", plural(c.Messages, "previewed message", "previewed messages"), isAre(c.Messages), code(c.Replay, 80), pick(c.Messages, "it", "them"))
	case engine.ChangeReplayedElsewhere:
		return fmt.Sprintf(":repeat: *Replayed elsewhere* — %s %s sent by another replay after this preview; approving sends %s again.", plural(c.Messages, "previewed message", "previewed messages"), wasWere(c.Messages), pick(c.Messages, "it", "them"))
	}
	return ":warning: *" + esc(oneLine(string(c.Kind)), 60) + "* — " + esc(oneLine(c.Detail), 500)
}

func changesText(changes []engine.Change) string {
	s := "The DLQ or its targets changed since the preview: " + plural(len(changes), "change", "changes")
	if len(changes) > 0 {
		s += ", first: " + escape(oneLine(changes[0].Detail))
	}
	return fallback(s + ". Nothing has been sent.")
}

func belongs(n int) string { return pick(n, "belongs", "belong") }
