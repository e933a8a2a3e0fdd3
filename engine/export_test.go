package engine

import "github.com/stroma/dlqbot/engine/letter"

// Exports for the tests only.

// ParseMeta is ParseMetaDialect without an in-house dialect.
func ParseMeta(dlq string, m letter.Message) letter.Meta {
	return letter.ParseMetaDialect(dlq, m, letter.HeaderDialect{})
}
