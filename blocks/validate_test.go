package blocks

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/slack-go/slack"
)

// Validate checks a rendered message against Slack's Block Kit limits: the
// number of blocks, text lengths of sections, fields, headers and context
// elements, button labels, values and action ids, confirm dialogs, block
// ids (at most 255 characters and unique) and empty texts. It returns every
// violation found, joined, or nil.
func Validate(blocks []slack.Block) error {
	var errs []error
	add := func(i int, format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf("block %d: "+format, append([]any{i}, args...)...))
		}
	}
	if len(blocks) > MaxBlocks {
		errs = append(errs, fmt.Errorf("%d blocks; at most %d", len(blocks), MaxBlocks))
	}
	ids := map[string]bool{}
	for i, b := range blocks {
		if b == nil {
			add(i, "nil block")
			continue
		}
		if id := b.ID(); id != "" {
			if n := utf8.RuneCountInString(id); n > MaxBlockID {
				add(i, "block_id of %d characters; at most %d", n, MaxBlockID)
			}
			if ids[id] {
				add(i, "duplicate block_id %q", id)
			}
			ids[id] = true
		}
		switch b := b.(type) {
		case *slack.SectionBlock:
			if b.Text == nil && len(b.Fields) == 0 {
				add(i, "section without text or fields")
			}
			if b.Text != nil {
				checkText(func(f string, a ...any) { add(i, "section text: "+f, a...) }, b.Text, MaxSectionText)
			}
			if len(b.Fields) > MaxFields {
				add(i, "%d fields; at most %d", len(b.Fields), MaxFields)
			}
			for j, f := range b.Fields {
				checkText(func(fm string, a ...any) { add(i, fmt.Sprintf("field %d: ", j)+fm, a...) }, f, MaxFieldText)
			}
			if b.Accessory != nil && b.Accessory.ButtonElement != nil {
				checkButton(func(f string, a ...any) { add(i, "accessory: "+f, a...) }, b.Accessory.ButtonElement)
			}
		case *slack.HeaderBlock:
			checkText(func(f string, a ...any) { add(i, "header: "+f, a...) }, b.Text, MaxHeaderText)
			if b.Text != nil && b.Text.Type != slack.PlainTextType {
				add(i, "header text must be plain_text")
			}
		case *slack.ContextBlock:
			els := b.ContextElements.Elements
			if len(els) == 0 || len(els) > MaxContextElements {
				add(i, "context with %d elements; 1 to %d", len(els), MaxContextElements)
			}
			for j, e := range els {
				if t, ok := e.(*slack.TextBlockObject); ok {
					checkText(func(f string, a ...any) { add(i, fmt.Sprintf("context element %d: ", j)+f, a...) }, t, MaxContextText)
				}
			}
		case *slack.ActionBlock:
			if b.Elements == nil || len(b.Elements.ElementSet) == 0 || len(b.Elements.ElementSet) > MaxActionElements {
				n := 0
				if b.Elements != nil {
					n = len(b.Elements.ElementSet)
				}
				add(i, "actions with %d elements; 1 to %d", n, MaxActionElements)
				continue
			}
			actions := map[string]bool{}
			for j, e := range b.Elements.ElementSet {
				btn, ok := e.(*slack.ButtonBlockElement)
				if !ok {
					continue
				}
				checkButton(func(f string, a ...any) { add(i, fmt.Sprintf("button %d: ", j)+f, a...) }, btn)
				if btn.ActionID != "" && actions[btn.ActionID] {
					add(i, "duplicate action_id %q", btn.ActionID)
				}
				actions[btn.ActionID] = true
			}
		}
	}
	return errors.Join(errs...)
}

// checkText reports an absent, empty or too long text object.
func checkText(add func(string, ...any), t *slack.TextBlockObject, max int) {
	if t == nil {
		add("missing text")
		return
	}
	n := utf8.RuneCountInString(t.Text)
	switch {
	case n == 0:
		add("empty text")
	case n > max:
		add("%d characters; at most %d", n, max)
	}
}

// checkButton reports a button whose label, value, action id or confirm
// dialog is over Slack's limits.
func checkButton(add func(string, ...any), b *slack.ButtonBlockElement) {
	checkText(func(f string, a ...any) { add("label: "+f, a...) }, b.Text, MaxButtonText)
	if n := utf8.RuneCountInString(b.Value); n > MaxButtonValue {
		add("value of %d characters; at most %d", n, MaxButtonValue)
	}
	if n := utf8.RuneCountInString(b.ActionID); n > MaxActionID {
		add("action_id of %d characters; at most %d", n, MaxActionID)
	}
	if c := b.Confirm; c != nil {
		checkText(func(f string, a ...any) { add("confirm title: "+f, a...) }, c.Title, MaxConfirmTitle)
		checkText(func(f string, a ...any) { add("confirm text: "+f, a...) }, c.Text, MaxConfirmText)
		checkText(func(f string, a ...any) { add("confirm button: "+f, a...) }, c.Confirm, MaxConfirmButton)
		if c.Deny != nil {
			checkText(func(f string, a ...any) { add("deny button: "+f, a...) }, c.Deny, MaxConfirmButton)
		}
	}
}
