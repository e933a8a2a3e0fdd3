package commands

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// token is one word of a command: a positional word ("preview",
// "orders.dlq") or a key=value pair.
type token struct {
	raw   string // as typed, for replies
	key   string // lower-cased key of a key=value pair; "" for a positional word
	value string // the value, unquoted
	eq    bool   // written key=value
}

// closers maps each opening quote to its closing quote. Straight double
// quotes take Go escapes (canonical output uses %q); the others are literal,
// so a value pasted with "smart" quotes from a chat client still works.
var closers = map[rune]rune{'"': '"', '\'': '\'', '“': '”', '‘': '’'}

// tokenize splits a slash command's text into tokens. Words are separated by
// any Unicode white space. A value may be quoted, whole or after key=:
// exception="timeout while". It returns a reply when the quoting is broken.
func tokenize(text string) ([]token, string) {
	rs := []rune(text)
	var toks []token
	i := 0
	for {
		for i < len(rs) && unicode.IsSpace(rs[i]) {
			i++
		}
		if i >= len(rs) {
			return toks, ""
		}
		start := i
		var t token
		var msg string
		quoted := false
		if closer, ok := closers[rs[i]]; ok {
			t.value, i, msg = readQuoted(rs, i, closer)
			quoted = true
		} else {
			j := i
			for j < len(rs) && !unicode.IsSpace(rs[j]) && rs[j] != '=' {
				j++
			}
			if j < len(rs) && rs[j] == '=' {
				t.eq, t.key = true, strings.ToLower(string(rs[i:j]))
				j++
				if closer, ok := closers[at(rs, j)]; ok {
					t.value, i, msg = readQuoted(rs, j, closer)
					quoted = true
				} else {
					i = wordEnd(rs, j)
					t.value = string(rs[j:i])
				}
			} else {
				i = wordEnd(rs, j)
				t.value = string(rs[start:i])
			}
		}
		if msg != "" {
			return nil, msg
		}
		if quoted && i < len(rs) && !unicode.IsSpace(rs[i]) {
			after := string(rs[i:wordEnd(rs, i)])
			return nil, fmt.Sprintf("Unexpected `%s` right after the closing quote of `%s`; put a space between them.", after, string(rs[start:i]))
		}
		t.raw = string(rs[start:i])
		toks = append(toks, t)
	}
}

// at returns rs[i], or 0 past the end.
func at(rs []rune, i int) rune {
	if i < len(rs) {
		return rs[i]
	}
	return 0
}

// wordEnd returns the index of the first white space at or after i.
func wordEnd(rs []rune, i int) int {
	for i < len(rs) && !unicode.IsSpace(rs[i]) {
		i++
	}
	return i
}

// readQuoted reads the quoted value opening at rs[open] and returns it with
// the index just after the closing quote.
func readQuoted(rs []rune, open int, closer rune) (string, int, string) {
	escapes := rs[open] == '"'
	for j := open + 1; j < len(rs); j++ {
		switch {
		case escapes && rs[j] == '\\':
			j++
		case rs[j] == closer:
			if escapes {
				return unquote(string(rs[open : j+1])), j + 1, ""
			}
			return string(rs[open+1 : j]), j + 1, ""
		}
	}
	return "", 0, fmt.Sprintf("The quote opened in `%s` is never closed; close it, as in exception=\"timeout while\".", string(rs[open:]))
}

// unquote undoes Go quoting (what canonical output uses). Text a person typed
// may not be valid Go ("C:\temp"): then only \" and \\ are unescaped and
// every other backslash is kept.
func unquote(quoted string) string {
	if s, err := strconv.Unquote(quoted); err == nil {
		return s
	}
	inner := quoted[1 : len(quoted)-1]
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		if inner[i] == '\\' && i+1 < len(inner) && (inner[i+1] == '"' || inner[i+1] == '\\') {
			i++
		}
		b.WriteByte(inner[i])
	}
	return b.String()
}

// argToken makes a token of one shell argument. The shell already split and
// unquoted the line, so a value with spaces is one argument; a value still
// wrapped in double quotes ('exception="a b"') is unquoted once more.
func argToken(arg string) token {
	t := token{raw: arg, value: arg}
	if k, v, ok := strings.Cut(arg, "="); ok {
		t.eq, t.key, t.value = true, strings.ToLower(k), v
	}
	if len(t.value) >= 2 && t.value[0] == '"' && t.value[len(t.value)-1] == '"' {
		t.value = unquote(t.value)
	}
	return t
}

// UnescapeSlack undoes what Slack does to a slash command's text before
// sending it: links it recognised come as <http://host|label> or <url>, and
// &, < and > come as &amp;, &lt; and &gt;. A queue name that looks like a
// domain ("events.live") can be turned into a link. The bot calls this on
// the text field before Parse; the terminal front end does not need it.
func UnescapeSlack(text string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(text, '<')
		if open < 0 {
			b.WriteString(text)
			break
		}
		end := strings.IndexByte(text[open:], '>')
		if end < 0 {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:open])
		inner := text[open+1 : open+end]
		if _, label, ok := strings.Cut(inner, "|"); ok {
			b.WriteString(label)
		} else {
			b.WriteString(strings.TrimPrefix(strings.TrimPrefix(inner, "http://"), "https://"))
		}
		text = text[open+end+1:]
	}
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(b.String())
}
