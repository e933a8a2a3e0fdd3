package letter

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxTypeLen is the longest exception type FailureType returns.
const maxTypeLen = 120

// typeNameRE is what a failure's type may look like to be shown in a
// channel: a (qualified) class name such as "java.lang.IllegalStateException",
// "System.InvalidOperationException", "Foo+Bar", "CurrencyNotSupported",
// or an error code such as "ECONNREFUSED" or "500". No spaces, no
// punctuation that could carry a sentence.
var typeNameRE = regexp.MustCompile("^(?:[A-Za-z_$][A-Za-z0-9_$`]*(?:[.+][A-Za-z_$][A-Za-z0-9_$`]*)*|[0-9]{1,6})$")

// FailureType is what may be shown of a failure to a whole channel: the
// exception's type (its class name) where the dialect gives one
// (Spring's x-exception-stacktrace first line, MassTransit's
// MT-Fault-ExceptionType, NServiceBus's ExceptionInfo.ExceptionType,
// rascal's error.code) or the exception text starts with one
// ("com.foo.BarException: …"), else the dead-letter reason. A type that
// does not look like a class name or an error code is not shown: the
// reason stands in for it. The exception's message never appears here.
func FailureType(excType, exc string, reason Reason) string {
	if t := strings.TrimSpace(excType); validType(t) {
		return t
	}
	if loc := groupTypeRE.FindStringIndex(strings.TrimSpace(exc)); loc != nil {
		name := strings.TrimSuffix(strings.TrimSpace(exc)[:loc[1]], ":")
		if looksLikeType(name) && validType(name) {
			return name
		}
	}
	if reason == "" {
		return string(ReasonUnknown)
	}
	return string(reason)
}

// validType reports whether t may be shown as a failure's type.
func validType(t string) bool {
	return t != "" && len(t) <= maxTypeLen && typeNameRE.MatchString(t)
}

// GroupType is the type of a failure group known only by its text and
// an example's reason (a return recorded before types were recorded):
// the group's leading type name, else the reason.
func GroupType(group, reason string) string {
	return FailureType("", group, Reason(reason))
}

// QueueNameProblem says why name, taken from a message's headers, is not a
// usable queue name, or "" when it is: it must be valid UTF-8 of at most
// 255 bytes, without white space, control or format (invisible)
// characters — the same check as a queue name typed in a command. A
// message whose header names such a queue has no valid target and is never
// replayed to it.
func QueueNameProblem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	case len(name) > maxNameLen:
		return fmt.Sprintf("is %d bytes long; RabbitMQ names are at most %d bytes", len(name), maxNameLen)
	}
	if r, ok := BadNameRune(name); ok {
		return fmt.Sprintf("contains white space, a control character or an invisible one (%U)", r)
	}
	return ""
}

// BadNameRune returns the first character of a queue name that no one
// means to type and few can see: white space, a control character or a
// format (invisible) one such as U+200B. Typed queue names and names
// taken from headers are refused with it.
func BadNameRune(name string) (rune, bool) {
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError {
			return r, true
		}
	}
	return 0, false
}

// nameScripts are the scripts MixedScripts tells apart: those whose
// letters are commonly confused with Latin ones.
var nameScripts = []struct {
	name  string
	table *unicode.RangeTable
}{
	{"Latin", unicode.Latin}, {"Cyrillic", unicode.Cyrillic}, {"Greek", unicode.Greek},
	{"Armenian", unicode.Armenian}, {"Cherokee", unicode.Cherokee},
}

// MixedScripts names the scripts of a queue name whose letters come from
// more than one of Latin, Cyrillic, Greek, Armenian and Cherokee ("Latin
// and Cyrillic"), or "" otherwise: such a name can look like another
// queue's ("оrders" with a Cyrillic о) and is flagged wherever it is shown.
func MixedScripts(name string) string {
	var seen []string
	for _, r := range name {
		if !unicode.IsLetter(r) {
			continue
		}
		for _, s := range nameScripts {
			if unicode.Is(s.table, r) {
				found := false
				for _, x := range seen {
					found = found || x == s.name
				}
				if !found {
					seen = append(seen, s.name)
				}
				break
			}
		}
	}
	if len(seen) < 2 {
		return ""
	}
	return strings.Join(seen[:len(seen)-1], ", ") + " and " + seen[len(seen)-1]
}
