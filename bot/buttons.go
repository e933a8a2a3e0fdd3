package bot

import (
	"context"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/redact"
)

// previewClick posts the preview a Preview-this-group or
// Preview-the-copies-back button names: its value is a selection in the
// command grammar ("orders.dlq reason=rejected group=g3f2a9c1b7e4d"). The
// clicking user needs read on the DLQ, checked by preview like any other;
// a value that is not a selection is refused and changes nothing.
func (b *Bot) previewClick(ctx context.Context, to replyTo, value string) {
	sel, msg := commands.ParseSelection(value, b.now())
	if msg != "" {
		b.log.Info().Str("value", redact.Tokens(value)).Str("reply", msg).Msg("preview button refused: not a selection")
		b.refuse(ctx, to, "That button does not name a selection I can preview; nothing was done. Run `"+b.cfg.CommandName+" preview <dlq> group=<id>` instead.")
		return
	}
	b.preview(ctx, to, commands.PreviewCmd{Selection: sel})
}
