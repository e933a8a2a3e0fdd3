package bot

import (
	"context"
	"fmt"
	"strings"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// control pauses, resumes or cancels a replay for a command or a click on
// the progress message (ops.Control). The progress message shows the
// result when the engine reports it; a click on success says nothing
// more.
func (b *Bot) control(ctx context.Context, to replyTo, action engine.ControlAction, id string, click bool) {
	after, err := b.d.Ops.Control(ctx, ops.SlackCaller(to.user), action, id)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, id))
		return
	}
	if !click {
		b.say(ctx, to, fmt.Sprintf("%s requested for replay `%s` (it is %s now); it takes effect within a second and the progress message will show it.",
			upperFirst(string(action)), id, after.State))
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
