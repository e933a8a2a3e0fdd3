package commands

import "strings"

// Term is one word of dlqbot's vocabulary: the one name every front end
// (Slack cards, the dashboard, the terminal, the JSON documents) uses for
// one quantity.
type Term struct {
	Name    string // as people read it: "came back"
	JSON    string // the field of a replay's JSON document that counts it, if any
	Meaning string // one sentence
}

// Glossary is the vocabulary, defined once: `help glossary` lists it,
// `help <term>` answers for each and the README's table is written from it
// (internal/doccheck keeps it so). blocks/, the dashboard and the
// terminal's printer use these names and no synonyms (blocks' vocabulary
// test checks them).
var Glossary = []Term{
	{"sent", "sent", "Copies of previewed messages the broker confirmed it took; each original is acked from the DLQ only then."},
	{"settled", "settled", "Sent copies that left the target queue (a consumer took them, whether it then acked them or they came back, so settled counts the copies that came back too); a step ends when all of them settled."},
	{"came back", "returned", "Sent copies dead-lettered again, carrying this replay's id: the canary stops on them and `check` groups them."},
	{"missing", "missing", "Previewed messages no longer in the DLQ when their step came (something else took them): not sent."},
	{"in doubt", "in_doubt", "Copies in flight when the broker connection was lost: maybe delivered; their originals stay in the DLQ and are not sent again unless you resume with resend=in-doubt."},
	{"not delivered", "failed", "Copies the broker refused or could not route (no queue took them): their originals stay in the DLQ."},
	{"new failures", "new_failures", "Messages dead-lettered in the DLQ since the replay started that do not carry its id (failures that are not this replay's), counted over one of two windows named beside the number: *during the replay* (to its last step: its card, thread, dashboard page and status) or *since the replay began* (to the moment of a `check` or follow-up, so it grows while the DLQ keeps receiving failures)."},
	{"held", "", "Previewed messages another client holds unacknowledged, or another replay is sending: they stay in the DLQ and are not counted as missing."},
	{"tap", "returns_mode", "A queue bound beside the DLQ that sees every message dead-lettered into it, so copies that came back are counted without reading the DLQ."},
}

// termTopic is the help topic of a term: its name with spaces as
// underscores ("came_back").
func termTopic(name string) string { return strings.ReplaceAll(name, " ", "_") }

// termAliases maps other words for the terms to their topics.
var termAliases = map[string]string{
	"returned": "came_back", "returns": "came_back", "return": "came_back", "comeback": "came_back",
	"settle": "settled", "in-doubt": "in_doubt", "indoubt": "in_doubt",
	"failed": "not_delivered", "undelivered": "not_delivered", "new_failure": "new_failures",
	"held_elsewhere": "held", "vocabulary": "glossary", "words": "glossary", "terms": "glossary",
}

// glossaryTopics lists the terms' help topics.
func glossaryTopics() []string {
	t := make([]string, len(Glossary))
	for i, g := range Glossary {
		t[i] = termTopic(g.Name)
	}
	return t
}

// writeGlossary writes every term with its sentence.
func writeGlossary(b *strings.Builder) {
	b.WriteString("*Glossary*: the words every dlqbot screen uses for its numbers\n")
	for _, g := range Glossary {
		b.WriteString("• *" + g.Name + "*: " + g.Meaning + "\n")
	}
}

// writeTerm writes one term, or reports that topic is none.
func writeTerm(b *strings.Builder, prefix, topic string) bool {
	for _, g := range Glossary {
		if termTopic(g.Name) == topic {
			b.WriteString("*" + g.Name + "*: " + g.Meaning + "\n")
			if g.JSON != "" {
				b.WriteString("JSON field: `" + g.JSON + "`. ")
			}
			b.WriteString("All terms: `" + prefix + " help glossary`\n")
			return true
		}
	}
	return false
}
