package letter

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Limits of NormaliseException.
const (
	// groupMaxLen is the longest failure group, in characters.
	groupMaxLen = 200
	// groupInputLimit is how much of the input is looked at, in bytes.
	groupInputLimit = 4096
)

var (
	// groupUUIDRE matches a UUID in its 8-4-4-4-12 form.
	groupUUIDRE = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	// groupTimeRE matches ISO 8601 / RFC 3339 dates and date-times ("2024-01-02",
	// "2024-01-02T15:04:05.123Z", "2024-01-02 15:04:05:000000 Z", with or
	// without a zone) and bare clock times ("15:04:05.123").
	groupTimeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,:]\d+)?)?(?:\s?(?:Z|UTC|GMT|[+-]\d{2}:?\d{2})\b)?)?` +
		`|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b`)
	// groupTypeRE matches a leading type name such as
	// "com.foo.Bar$BazException" or "System.Data.SqlException", when it is
	// the whole string or followed by ':'.
	groupTypeRE = regexp.MustCompile("^[A-Za-z_$][\\w$`]*(?:[.+][A-Za-z_$][\\w$`]*)*(?::|$)")
)

// NormaliseException folds the variable parts of an exception text so that
// the same failure groups together whatever order, amount or id it was
// about: UUIDs become <uuid>, ISO / RFC 3339 timestamps and clock times
// <time>, 0x-prefixed numbers and hex strings of 8 or more characters
// holding a digit <hex>, numbers (with decimal separators) <n> and numbers
// with a short unit <n>unit ("30000ms" → "<n>ms"), other words of 6 or more
// letters and digits holding a digit <id>, and the digits of shorter words
// <n> ("v2" → "v<n>"). A leading exception type ("com.foo.
// BarException: …", "ValueError: …") is kept verbatim, so different types
// stay apart. Whitespace is collapsed and trimmed, and the result is capped
// at 200 characters (only the first 4 KB of s are looked at).
func NormaliseException(s string) string {
	s = TruncateUTF8(s, groupInputLimit)
	s = strings.TrimSpace(s)
	prefix := ""
	if loc := groupTypeRE.FindStringIndex(s); loc != nil {
		name := strings.TrimSuffix(s[:loc[1]], ":")
		if looksLikeType(name) {
			prefix, s = name, s[len(name):]
		}
	}
	s = groupUUIDRE.ReplaceAllLiteralString(s, "<uuid>")
	s = groupTimeRE.ReplaceAllLiteralString(s, "<time>")
	s = strings.Join(strings.Fields(prefix+foldTokens(s)), " ")
	if utf8.RuneCountInString(s) > groupMaxLen {
		i, n := 0, 0
		for i = range s {
			if n == groupMaxLen {
				break
			}
			n++
		}
		s = strings.TrimSpace(s[:i])
	}
	return s
}

// looksLikeType reports whether a leading name is an exception type rather
// than data: it is qualified (has a '.' or '+') or ends like a type name.
func looksLikeType(name string) bool {
	if strings.ContainsAny(name, ".+") {
		return true
	}
	for _, suffix := range []string{"Exception", "Error", "Fault", "Failure"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

// foldTokens replaces the runs of ASCII letters and digits of s that carry
// variable data (see NormaliseException); every other byte is kept.
func foldTokens(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if !isASCIIAlnum(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && isASCIIAlnum(s[j]) {
			j++
		}
		tok := s[i:j]
		if allASCIIDigits(tok) {
			// Take decimal and thousands separators into the number:
			// "1,234.50" is one amount.
			for j+1 < len(s) && (s[j] == '.' || s[j] == ',') && isASCIIDigit(s[j+1]) {
				j++
				for j < len(s) && isASCIIDigit(s[j]) {
					j++
				}
			}
			b.WriteString("<n>")
			i = j
			continue
		}
		b.WriteString(foldWord(tok))
		i = j
	}
	return b.String()
}

// foldWord classifies one run of letters and digits that is not a number.
func foldWord(tok string) string {
	digits := 0
	for i := 0; i < len(tok); i++ {
		if isASCIIDigit(tok[i]) {
			digits++
		}
	}
	switch {
	case len(tok) > 2 && (tok[:2] == "0x" || tok[:2] == "0X") && allHexDigits(tok[2:]):
		return "<hex>"
	case digits == 0:
		return tok
	case isNumberWithUnit(tok):
		// "30000ms", "12GB", "3rd": the number varies, the unit does not.
		i := 0
		for isASCIIDigit(tok[i]) {
			i++
		}
		return "<n>" + tok[i:]
	case len(tok) >= 8 && allHexDigits(tok):
		return "<hex>"
	case len(tok) >= 6:
		return "<id>"
	}
	// A short word with digits ("v2", "utf8", "ORD9"): fold only its digits.
	var b strings.Builder
	for i := 0; i < len(tok); {
		if !isASCIIDigit(tok[i]) {
			b.WriteByte(tok[i])
			i++
			continue
		}
		for i < len(tok) && isASCIIDigit(tok[i]) {
			i++
		}
		b.WriteString("<n>")
	}
	return b.String()
}

// isNumberWithUnit reports whether tok is digits followed by one to three
// letters.
func isNumberWithUnit(tok string) bool {
	i := 0
	for i < len(tok) && isASCIIDigit(tok[i]) {
		i++
	}
	rest := tok[i:]
	return i > 0 && len(rest) >= 1 && len(rest) <= 3 && !strings.ContainsAny(rest, "0123456789")
}

func isASCIIDigit(c byte) bool { return c >= '0' && c <= '9' }

func isASCIIAlnum(c byte) bool {
	return isASCIIDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func allASCIIDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isASCIIDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func allHexDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isASCIIDigit(c) && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return s != ""
}
