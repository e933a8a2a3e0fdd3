package letter

// Exports for the tests only.

// ParseMeta is ParseMetaDialect without an in-house dialect.
func ParseMeta(dlq string, m Message) Meta {
	return ParseMetaDialect(dlq, m, HeaderDialect{})
}

// DeathHeaders lists the headers IsDeathHeader matches: the exact names,
// then each prefix with a trailing "*". The result is a fresh slice the
// caller may keep.
func DeathHeaders() []string {
	out := append([]string(nil), deathHeaderNames...)
	for _, p := range deathHeaderPrefixes {
		out = append(out, p+"*")
	}
	return out
}
