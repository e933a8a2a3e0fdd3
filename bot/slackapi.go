package bot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/blocks"
	"github.com/stroma/dlqbot/redact"
)

// replyTo is where a request's answers go.
type replyTo struct {
	user        string
	channel     string
	responseURL string
}

// requestAttempts is how often a call made for a request is tried.
const requestAttempts = 4

// maxBackoff caps the wait between retries of a failing Slack call.
const maxBackoff = 30 * time.Second

// retryWait says whether err is worth retrying and how long to wait first
// (attempt counts from 0): Retry-After for a rate limit, exponential
// backoff for outages (HTTP 5xx, network errors), never for Slack's own
// refusals (channel_not_found, message_not_found, …).
func retryWait(err error, attempt int) (time.Duration, bool) {
	backoff := min(time.Second<<min(attempt, 5), maxBackoff)
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	var se slack.SlackErrorResponse
	var ue *url.Error
	var ne net.Error
	switch {
	case errors.As(err, &rl):
		return max(rl.RetryAfter, 100*time.Millisecond), true
	case errors.As(err, &sc):
		return backoff, sc.Code >= 500 || sc.Code == 429 || sc.Code == 408
	case errors.As(err, &se):
		return backoff, se.Err == "ratelimited" || se.Err == "internal_error" || se.Err == "fatal_error" || se.Err == "service_unavailable"
	case errors.As(err, &ue), errors.As(err, &ne):
		return backoff, true
	}
	return 0, false
}

// retry calls fn until it succeeds, fails for good, has been tried
// attempts times (attempts ≤ 0: until ctx ends) or ctx ends.
func (n *Notifier) retry(ctx context.Context, what string, attempts int, fn func(ctx context.Context) error) error {
	for i := 0; ; i++ {
		if err := n.holds.wait(ctx, what); err != nil {
			return fmt.Errorf("bot: %s held by a rate limit: %w", what, err)
		}
		err := fn(ctx)
		if o := n.observer; o != nil {
			o.SlackCall(what, err)
		}
		if err == nil {
			return nil
		}
		wait, ok := retryWait(err, i)
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) {
			n.holds.hold(what, time.Now().Add(wait)) // every call of the method waits
		}
		if !ok || (attempts > 0 && i+1 >= attempts) || ctx.Err() != nil {
			return err
		}
		if o := n.observer; o != nil {
			o.SlackRetry(what)
		}
		n.log.Warn().Err(err).Str("call", what).Dur("retry_in", wait).Int("attempt", i+1).Msg("slack call failed; retrying")
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// post posts a message (a thread reply when thread is set) and returns its ts.
func (n *Notifier) post(ctx context.Context, attempts int, channel, thread string, bl []slack.Block, text string) (string, error) {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if len(bl) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(bl...))
	}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	var ts string
	err := n.retry(ctx, "chat.postMessage", attempts, func(ctx context.Context) error {
		var err error
		_, ts, err = n.api.PostMessageContext(ctx, channel, opts...)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("bot: post in %s: %w", channel, err)
	}
	return ts, nil
}

// update replaces a message's blocks.
func (n *Notifier) update(ctx context.Context, attempts int, channel, ts string, bl []slack.Block, text string) error {
	err := n.retry(ctx, "chat.update", attempts, func(ctx context.Context) error {
		_, _, _, err := n.api.UpdateMessageContext(ctx, channel, ts, slack.MsgOptionText(text, false), slack.MsgOptionBlocks(bl...))
		return err
	})
	if err != nil {
		return fmt.Errorf("bot: update %s/%s: %w", channel, ts, err)
	}
	return nil
}

// ephemeral shows blocks to the requester only: through the request's
// response_url, else chat.postEphemeral.
func (b *Bot) ephemeral(ctx context.Context, to replyTo, bl []slack.Block, text string) {
	var err error
	if to.responseURL != "" {
		msg := &slack.WebhookMessage{ResponseType: slack.ResponseTypeEphemeral, Text: text}
		if len(bl) > 0 {
			msg.Blocks = &slack.Blocks{BlockSet: bl}
		}
		err = b.retry(ctx, "response_url", requestAttempts, func(ctx context.Context) error {
			return slack.PostWebhookCustomHTTPContext(ctx, to.responseURL, b.cfg.HTTPClient, msg)
		})
		if err == nil {
			return
		}
		b.log.Warn().Err(err).Str("user", to.user).Msg("response_url failed; falling back to chat.postEphemeral")
	}
	if to.channel == "" || to.user == "" {
		return
	}
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if len(bl) > 0 {
		opts = append(opts, slack.MsgOptionBlocks(bl...))
	}
	err = b.retry(ctx, "chat.postEphemeral", requestAttempts, func(ctx context.Context) error {
		_, err := b.api.PostEphemeralContext(ctx, to.channel, to.user, opts...)
		return err
	})
	if err != nil {
		b.log.Error().Err(err).Str("user", to.user).Msg("could not answer the user")
	}
}

// say answers the requester ephemerally with mrkdwn text.
func (b *Bot) say(ctx context.Context, to replyTo, text string) {
	b.ephemeral(ctx, to, []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, clipText(text, blocks.MaxSectionText), false, false), nil, nil)}, clipText(text, blocks.MaxFallbackText))
}

// refuse answers a refused or failed request: ephemeral, naming the
// problem, logged but never posted to the activity channel.
func (b *Bot) refuse(ctx context.Context, to replyTo, msg string) {
	b.log.Info().Str("user", to.user).Str("channel", to.channel).Str("reason", redact.Tokens(msg)).Msg("request refused")
	bl, text := blocks.Error(msg)
	b.ephemeral(ctx, to, bl, text)
}

// clipText cuts s to at most n runes, ending with "…" when cut.
func clipText(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return string(rs[:n-1]) + "…"
}
