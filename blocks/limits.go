package blocks

import (
	"strings"

	"github.com/slack-go/slack"
)

// Slack's Block Kit limits, from Slack's Block Kit reference. Lengths are
// in characters, counted as Unicode code points after escaping.
const (
	MaxBlocks          = 50   // blocks per message
	MaxSectionText     = 3000 // a section's text
	MaxFields          = 10   // fields per section
	MaxFieldText       = 2000 // one field's text
	MaxHeaderText      = 150  // a header block's plain text
	MaxContextElements = 10   // elements per context block
	MaxContextText     = 3000 // one context element's text
	MaxActionElements  = 25   // elements per actions block
	MaxButtonText      = 75   // a button's label
	MaxButtonValue     = 2000 // a button's value
	MaxActionID        = 255  // an action_id
	MaxBlockID         = 255  // a block_id
	MaxConfirmTitle    = 100  // a confirm dialog's title
	MaxConfirmText     = 300  // a confirm dialog's text
	MaxConfirmButton   = 30   // a confirm dialog's confirm and deny labels
	// MaxFallbackText caps the plain-text fallback the renderers return;
	// Slack truncates a message's text beyond 40,000 characters, and a
	// notification shows far less.
	MaxFallbackText = 500
)

// section returns a mrkdwn section, its text cut to the limit as a last
// resort (renderers budget their text so this rarely cuts).
func section(text string) *slack.SectionBlock {
	return slack.NewSectionBlock(mrkdwn(text, MaxSectionText), nil, nil)
}

// fields returns a section of mrkdwn fields, at most MaxFields of them.
func fields(texts ...string) *slack.SectionBlock {
	texts = texts[:min(len(texts), MaxFields)]
	fs := make([]*slack.TextBlockObject, len(texts))
	for i, t := range texts {
		fs[i] = mrkdwn(t, MaxFieldText)
	}
	return slack.NewSectionBlock(nil, fs, nil)
}

// header returns a header block; its plain text is cut to the limit.
func header(text string) *slack.HeaderBlock {
	return slack.NewHeaderBlock(plain(text, MaxHeaderText))
}

// contextBlock returns a context block of mrkdwn texts, with an optional
// block id.
func contextBlock(blockID string, texts ...string) *slack.ContextBlock {
	texts = texts[:min(len(texts), MaxContextElements)]
	els := make([]slack.MixedElement, len(texts))
	for i, t := range texts {
		els[i] = mrkdwn(t, MaxContextText)
	}
	return slack.NewContextBlock(blockID, els...)
}

// mrkdwn returns a mrkdwn text object of at most max characters (never
// empty: Slack rejects empty texts).
func mrkdwn(text string, max int) *slack.TextBlockObject {
	if strings.TrimSpace(text) == "" {
		text = "-"
	}
	return slack.NewTextBlockObject(slack.MarkdownType, clip(text, max), false, false)
}

// plain returns a plain_text object of at most max characters, with emoji.
func plain(text string, max int) *slack.TextBlockObject {
	text = oneLine(text)
	if text == "" {
		text = "-"
	}
	return slack.NewTextBlockObject(slack.PlainTextType, clip(text, max), true, false)
}

// fallback cuts a notification text to MaxFallbackText.
func fallback(text string) string {
	return clip(oneLine(text), MaxFallbackText)
}
