package blocks

import (
	"fmt"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// Shorthands the tests use: the renderers under the default command, and
// the preview as the bot's edits show it once approved or discarded (the
// bot edits the posted message with Approved and Discarded instead).

// DefaultCommand is the slash command the shorthands name in their hints.
const DefaultCommand = "/dlq"

// StepReply is StepReplyAs under DefaultCommand.
func StepReply(e engine.Event) string { return StepReplyAs(DefaultCommand, e) }

// Progress is ProgressAs under DefaultCommand.
func Progress(r engine.Replay, last *engine.StepResult) ([]slack.Block, string) {
	return ProgressAs(DefaultCommand, r, last)
}

// ProgressEvent is ProgressEventAs under DefaultCommand.
func ProgressEvent(e engine.Event) ([]slack.Block, string) {
	return ProgressEventAs(DefaultCommand, e)
}

// PreviewApproved renders the preview as edited once approved: the same
// summary, without buttons, saying who approved it and which replay
// started.
func PreviewApproved(p *engine.Preview, approver, replayID string) ([]slack.Block, string) {
	if p == nil {
		return Error("There is no preview to show.")
	}
	out := append(previewBody(p), contextBlock(BlockPreviewOutcome, approvedLine(approver, replayID)))
	return out, fallback(fmt.Sprintf("Preview of %s approved by %s: replay %s started.", escape(p.DLQ.Name), who(approver), escape(replayID)))
}

// PreviewDiscarded renders the preview as edited once discarded: without
// buttons, saying who discarded it.
func PreviewDiscarded(p *engine.Preview, by string) ([]slack.Block, string) {
	if p == nil {
		return Error("There is no preview to show.")
	}
	out := append(previewBody(p), contextBlock(BlockPreviewOutcome, discardedLine(by)))
	return out, fallback(fmt.Sprintf("Preview of %s discarded by %s; nothing was replayed.", escape(p.DLQ.Name), who(by)))
}
