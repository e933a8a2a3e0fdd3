package bot

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// previewShows is how many messages blocks.Preview shows one by one (its
// samples); a preview with more attaches the full list as a file.
const previewShows = 3

// preview scans the DLQ (changing nothing) and posts the preview in the
// channel, with Approve and Discard buttons bound to its token.
func (b *Bot) preview(ctx context.Context, to replyTo, c commands.PreviewCmd) {
	sel := c.Selection
	started := b.now()
	p, err := b.d.Ops.Preview(ctx, ops.SlackCaller(to.user).InChannel(to.channel), sel)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, sel.DLQ))
		return
	}
	b.log.Info().Str("dlq", sel.DLQ).Str("token_ref", audit.TokenRef(p.Token)).Int("scanned", p.Scanned).Int("selected", p.Selected).
		Dur("took", b.now().Sub(started)).Msg("preview made")
	bl, text := blocks.Preview(p, b.now())
	ts, err := b.post(ctx, requestAttempts, to.channel, "", bl, text)
	if err != nil {
		b.log.Warn().Err(err).Str("channel", to.channel).Msg("preview could not be posted")
		msg := "I could not post the preview in this channel (" + slackErrorText(err) + "). Invite me with `/invite @dlqbot`, or preview in a channel I am in."
		if p.Token != "" {
			msg += fmt.Sprintf(" The preview was made all the same: `%s replay %s` approves it.", b.cfg.CommandName, p.Token)
		}
		b.refuse(ctx, to, msg)
		return
	}
	if p.Token != "" {
		b.previews.Put(p.Token, previewMsg{channel: to.channel, ts: ts, blocks: bl, preview: p})
		// Any replica approving the token threads the replay under it.
		if err := b.d.Tokens.SetMessage(ctx, p.Token, to.channel, ts); err != nil {
			b.log.Warn().Err(err).Str("token_ref", audit.TokenRef(p.Token)).Msg("could not record where the preview was posted")
		}
	}
	// The requester has read on the DLQ (a preview needs it): the samples
	// and the list come to them alone.
	b.sendSamples(ctx, to, p)
}

// sendSamples shows p's sample messages to to.user ephemerally and, when p
// lists more messages than the samples, sends the full list as a CSV file
// in their direct message with the bot. The caller has checked that
// to.user may read p's DLQ.
func (b *Bot) sendSamples(ctx context.Context, to replyTo, p *engine.Preview) {
	if sb, st := blocks.Samples(p); blocks.HasSamples(p) {
		b.ephemeral(ctx, to, sb, st)
	}
	if max(p.Rows, len(p.Messages)) <= previewShows {
		return
	}
	dm, err := b.directMessage(ctx, to.user)
	if err != nil {
		b.log.Warn().Err(err).Str("user", to.user).Msg("could not open a direct message for the message list")
		b.say(ctx, to, "I could not send you the preview's message list: your direct message with me could not be opened ("+slackErrorText(err)+").")
		return
	}
	b.attachList(ctx, dm, "", p)
}

// directMessage opens (or finds) the direct message between the bot and user.
func (b *Bot) directMessage(ctx context.Context, user string) (string, error) {
	var id string
	err := b.retry(ctx, "conversations.open", requestAttempts, func(ctx context.Context) error {
		ch, _, _, err := b.api.OpenConversationContext(ctx, &slack.OpenConversationParameters{Users: []string{user}})
		if err == nil {
			id = ch.ID
		}
		return err
	})
	return id, err
}

// showDetails shows the one who clicked Details a preview's mechanics
// (blocks.PreviewDetails): nothing in them is a message's content, so no
// permission beyond seeing the preview is asked.
func (b *Bot) showDetails(ctx context.Context, to replyTo, token string) {
	pm, known := b.previews.Get(token)
	if !known || pm.preview == nil {
		b.refuse(ctx, to, "The details of this preview are held only by the dlqbot that made it, which is not the one answering (it restarted, or another replica did). Preview again to see them.")
		return
	}
	bl, text := blocks.PreviewDetails(pm.preview)
	b.ephemeral(ctx, to, bl, text)
}

// showSamples answers a click on a preview's Show samples button: the
// samples go, ephemerally, to whoever clicked if they may read the DLQ.
// Only the replica that made the preview holds them; elsewhere the clicker
// is told to preview again.
func (b *Bot) showSamples(ctx context.Context, to replyTo, token string) {
	pm, known := b.previews.Get(token)
	dlq := ""
	if known && pm.preview != nil {
		dlq = pm.preview.DLQ.Name
	}
	dlq, err := b.d.Ops.Samples(ctx, ops.SlackCaller(to.user), token, dlq)
	if err != nil {
		b.refuse(ctx, to, userMessage(err, dlq))
		return
	}
	if !known || pm.preview == nil {
		b.refuse(ctx, to, fmt.Sprintf("The samples of this preview are held only by the dlqbot that made it, which is not the one answering (it restarted, or another replica did). Preview `%s` again: the samples come to you alone.", blocks.EscapeKeepCode(dlq)))
		return
	}
	b.log.Info().Str("user", to.user).Str("dlq", dlq).Str("token_ref", audit.TokenRef(token)).Msg("samples shown")
	b.sendSamples(ctx, to, pm.preview)
}

// slackErrorText names a Slack failure briefly ("not_in_channel").
func slackErrorText(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return err.Error()
}

// attachList uploads the preview's full per-message list as a CSV file in
// channel (a reader's direct message: the list has exception text), in
// the thread ts when not empty (files upload v2). If the upload fails it
// posts the start of the list as a snippet instead.
func (b *Bot) attachList(ctx context.Context, channel, ts string, p *engine.Preview) {
	data, rows := listCSV(p, b.cfg.MaxListRows)
	copies := 0
	for _, m := range p.Messages {
		copies += m.Count
	}
	copies, distinct := max(copies, p.Matched), max(len(p.Messages), p.Rows)
	comment := fmt.Sprintf("Every message of this preview: %d distinct (%d copies), one row each.", distinct, copies)
	if rows < distinct {
		comment += fmt.Sprintf(" The first %d are listed; narrow the selection to see the rest.", rows)
	}
	name := "dlq-preview-" + fileSafe(p.DLQ.Name) + ".csv"
	err := b.retry(ctx, "files.upload", requestAttempts, func(ctx context.Context) error {
		_, err := b.api.UploadFileContext(ctx, slack.UploadFileParameters{
			Content: string(data), FileSize: len(data), Filename: name, Title: "Preview of " + p.DLQ.Name,
			Channel: channel, ThreadTimestamp: ts, InitialComment: comment, SnippetType: "csv",
		})
		return err
	})
	if err == nil {
		return
	}
	b.log.Warn().Err(err).Msg("message list upload failed; posting a snippet instead")
	snippet := string(data)
	const room = blocks.MaxSectionText - 200
	if len(snippet) > room {
		cut := strings.LastIndexByte(snippet[:room], '\n')
		snippet = snippet[:max(cut, 0)] + "\n…"
	}
	text := comment + " (The file could not be attached; here is the start of the list.)\n```" + snippet + "```"
	if _, err := b.post(ctx, requestAttempts, channel, ts, nil, text); err != nil {
		b.log.Warn().Err(err).Msg("message list snippet failed")
	}
}

// listCSV renders p's messages as CSV, at most maxRows rows, and returns
// it with the number of rows written.
func listCSV(p *engine.Preview, maxRows int) ([]byte, int) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write([]string{"id", "copies", "target", "parked", "reason", "attempts", "source", "first_death", "last_death",
		"exception_type", "exception", "replay_count", "replayed_by", "problems"})
	rows := 0
	for _, m := range p.Messages {
		if rows >= maxRows {
			break
		}
		var by []string
		for _, s := range m.Replayed {
			by = append(by, s.ReplayID)
		}
		_ = w.Write([]string{m.ID, strconv.Itoa(m.Count), m.Target, strconv.FormatBool(m.Parked), string(m.Reason),
			strconv.Itoa(m.Attempts), m.Source, csvTime(m.FirstDeath), csvTime(m.LastDeath), m.ExceptionType,
			clipText(m.Exception, 500), strconv.Itoa(m.ReplayCount), strings.Join(by, " "), strings.Join(m.Problems, "; ")})
		rows++
	}
	w.Flush()
	return buf.Bytes(), rows
}

func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// fileSafe keeps letters, digits, dots, dashes and underscores.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// previewMsg is where a preview was posted and what it showed.
type previewMsg struct {
	channel, ts string
	blocks      []slack.Block
	// preview is the preview itself, with its (redacted) samples, kept
	// for Show samples; nil for a preview made elsewhere.
	preview *engine.Preview
	// params were given with `replay <token>` when the world had changed,
	// so that "Approve anyway" applies them.
	params *engine.Params
}

// previewCacheSize is how many previews a bot remembers (see
// ops.PreviewCache): the previews it posted, so that `replay <token>` can
// edit the preview and thread the replay under it. A preview posted by
// another replica is not known here; the replay's progress then starts a
// thread of its own.
const previewCacheSize = 2000

func newPreviewCache() *ops.PreviewCache[previewMsg] {
	return ops.NewPreviewCache[previewMsg](previewCacheSize)
}
