package blocks

import (
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"
)

// Block Kit action ids (other tools and old messages rely on them: keep
// them). Approve and Discard carry the preview
// token (Approve possibly marked confirmed, see ApproveValue); Pause,
// Resume, Cancel, Park and Resend carry the replay id.
const (
	ActionApprove = "dlq.approve"
	ActionDiscard = "dlq.discard"
	ActionPause   = "dlq.pause"
	ActionResume  = "dlq.resume"
	ActionCancel  = "dlq.cancel"
	ActionPark    = "dlq.park"
	// ActionSamples asks for a preview's sample messages (value: the
	// preview token); they are shown only to a reader of the DLQ, ephemerally.
	ActionSamples = "dlq.samples"
	// ActionDetails asks for a preview's mechanics (value: the preview
	// token): read depth, budget, how returns are found; shown ephemerally.
	ActionDetails = "dlq.details"
	// ActionResend (value: the replay id) resumes a paused or stopped
	// replay with resend=in-doubt; shown while copies are in doubt.
	ActionResend = "dlq.resend"
)

// Block ids the renderers give the blocks a later edit replaces.
const (
	// BlockPreviewActions holds a preview's Approve and Discard buttons.
	BlockPreviewActions = "dlq.preview.actions"
	// BlockPreviewExpiry holds a preview's token expiry line.
	BlockPreviewExpiry = "dlq.preview.expiry"
	// BlockPreviewOutcome holds who approved or discarded a preview.
	BlockPreviewOutcome = "dlq.preview.outcome"
	// BlockPreviewReturns says how a replay would find returns.
	BlockPreviewReturns = "dlq.preview.returns"
	// BlockChangesActions holds the approve-anyway and Discard buttons.
	BlockChangesActions = "dlq.changes.actions"
	// BlockProgressControls holds a replay's Pause/Resume/Cancel buttons.
	BlockProgressControls = "dlq.progress.controls"
	// BlockCheckActions holds a check report's Park button.
	BlockCheckActions = "dlq.check.actions"
)

// confirmMark marks an approval given after seeing what changed since the
// preview; the digest of those changes follows it. Tokens are "p_" and
// base64url, which never contain ':'.
const confirmMark = ":confirm"

// ApproveValue is the value of a dlq.approve button: the preview token,
// followed by ":confirm:<digest>" when the approver has been shown the
// changes since the preview whose engine.ChangesDigest is digest and
// approves despite exactly those ("" for the preview's own button).
func ApproveValue(token, digest string) string {
	if digest != "" {
		return token + confirmMark + ":" + digest
	}
	return token
}

// ParseApproveValue splits a dlq.approve button value into the preview
// token and the digest of the changes the approval confirms ("" when
// none). It is the inverse of ApproveValue; a bare ":confirm" (a button
// that carried no digest) confirms no change, so the approval is refused
// with whatever changed, shown afresh.
func ParseApproveValue(v string) (token, digest string) {
	v = strings.TrimSpace(v)
	token, rest, found := strings.Cut(v, confirmMark)
	if !found {
		return v, ""
	}
	digest, _ = strings.CutPrefix(rest, ":")
	return token, digest
}

// button returns a button with a plain-text label cut to Slack's limit.
func button(actionID, value, label string, style slack.Style, confirm *slack.ConfirmationBlockObject) *slack.ButtonBlockElement {
	b := slack.NewButtonBlockElement(actionID, value, plain(label, MaxButtonText))
	if style != "" {
		b = b.WithStyle(style)
	}
	if confirm != nil {
		b = b.WithConfirm(confirm)
	}
	return b
}

// confirm returns a confirm dialog with plain-text parts cut to Slack's
// limits.
func confirm(title, text, yes, no string, style slack.Style) *slack.ConfirmationBlockObject {
	c := slack.NewConfirmationBlockObject(
		plain(title, MaxConfirmTitle),
		slack.NewTextBlockObject(slack.PlainTextType, clip(strings.TrimSpace(text), MaxConfirmText), false, false),
		plain(yes, MaxConfirmButton),
		plain(no, MaxConfirmButton),
	)
	if style != "" {
		c = c.WithStyle(style)
	}
	return c
}

// actions returns an actions block with a block id. Should a button's
// value not fit in Slack's limit (ids and tokens are short, so only
// malformed input gets here), it returns a context line instead: a
// truncated value would act on the wrong replay or token.
func actions(blockID string, buttons ...*slack.ButtonBlockElement) slack.Block {
	els := make([]slack.BlockElement, len(buttons))
	for i, b := range buttons {
		if utf8.RuneCountInString(b.Value) > MaxButtonValue {
			return contextBlock(blockID, ":warning: The id is too long for Slack buttons; use the slash command instead.")
		}
		els[i] = b
	}
	return slack.NewActionBlock(blockID, els...)
}

// resolve returns blocks without their buttons (every actions block) and
// without the preview's expiry line, followed by a context line saying how
// the message was resolved. It does not modify blocks.
func resolve(blocks []slack.Block, line string) []slack.Block {
	out := make([]slack.Block, 0, len(blocks)+1)
	for _, b := range blocks {
		if b == nil || b.BlockType() == slack.MBTAction {
			continue
		}
		switch b.ID() {
		case BlockPreviewExpiry, BlockPreviewOutcome:
			continue
		}
		out = append(out, b)
	}
	if len(out) >= MaxBlocks {
		out = out[:MaxBlocks-1]
	}
	return append(out, contextBlock(BlockPreviewOutcome, line))
}
