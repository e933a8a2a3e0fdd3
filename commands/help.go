package commands

import (
	"regexp"
	"slices"
	"strings"
)

// helpEntry documents one subcommand, filter or parameter.
type helpEntry struct {
	topic   string // what "help <topic>" names
	usage   string // "preview <dlq> [filters] [to=<queue>]", "reason=<reason>"
	text    string // what it does
	example string // one complete use, without the prefix
	more    string // longer explanation for the per-topic help
}

var commandHelp = []helpEntry{
	{"help", "help [<topic>]", "this help, or help on one command, filter or parameter", "help preview", ""},
	{"list", "list", "the dead-letter queues you may read, deepest first: depth, consumers and last replay", "list",
		"A queue is listed when another queue dead-letters into it, when its name ends .dlq, -dlq, _dlq, _error, .error or -error, or when a grant names it; only those you may read are shown. A preview shows a DLQ's arrivals and failure groups; `status` lists the replays."},
	{"preview", "preview <dlq> [filters] [to=<queue>]",
		"what a replay would do, per message and per target queue; changes nothing and gives a token",
		"preview orders.dlq reason=rejected since=2h",
		"The summary leads with what would go wrong: missing targets, targets without consumers, messages already replayed, messages to be parked. Each message goes back to its source queue unless to= names another. The token is valid for 24 hours by default and starts at most one replay."},
	{"replay", "replay <token> [step= cap= rate= timeout= takeover=yes]",
		"start the replay a preview froze (the preview's Approve button does the same)",
		"replay <token> step=5 rate=20",
		"A replay sends exactly the previewed messages, in canary steps: the first step holds one message of every target and failure group, then steps double up to the cap. It stops by itself when a message comes back to a dead-letter queue or a step does not settle before the timeout."},
	{"status", "status [<replay>]", "one replay's progress, or the active and recent replays", "status <replay>",
		"In the terminal, `dlqbot status <replay> --follow` follows the replay until it ends or stops, on one line redrawn in place."},
	{"pause", "pause <replay>", "pause a replay within a second; unsent messages stay in the DLQ", "pause <replay>", ""},
	{"resume", "resume <replay> [resend=in-doubt]", "resume a paused or stopped replay (a stopped one continues anyway)", "resume <replay> resend=in-doubt",
		"Copies in flight when the broker connection was lost are in doubt: maybe delivered, their originals still in the DLQ. A plain resume sends the rest and never these; `resend=in-doubt` sends them again first, each with its message_id, its x-dlqbot-copy and `x-dlqbot-possible-duplicate: true`, so a consumer can drop a second copy."},
	{"cancel", "cancel <replay>", "cancel a replay; unsent messages stay in the DLQ", "cancel <replay>", ""},
	{"check", "check <replay>", "whether the replay worked: how many of its messages were seen again in a dead-letter queue, grouped by exception or reason", "check <replay>",
		"Messages not seen again are reported as not seen in a dead-letter queue, which is not proof they were processed. Follow-ups run by themselves after 5 minutes, 2 hours and 24 hours."},
}

var filterHelp = []helpEntry{
	{"ids", "ids=<id,…>", "only these messages (the 16-hex-character ids a preview shows), comma-separated", examples["ids"], ""},
	{"reason", "reason=<reason>", "only messages dead-lettered for this reason: " + reasonList(), examples["reason"], ""},
	{"source", "source=<queue>", "only messages that came from this queue", examples["source"], ""},
	{"since", "since=<time>", "only messages last dead-lettered at or after this time: RFC 3339, a date, or a duration meaning that long ago (2h, 30m, 1d, 1w)", examples["since"], ""},
	{"until", "until=<time>", "only messages last dead-lettered at or before this time, written like since=", examples["until"], ""},
	{"exception", "exception=<text>", "only messages whose exception contains this text (any case); quote text with spaces", examples["exception"], ""},
	{"limit", "limit=<n>", "at most n messages, in DLQ order", examples["limit"], ""},
	{"park_after", "park_after=<n>", "leave out messages already replayed n times or more (default 3)", examples["park_after"], ""},
	{"include_parked", "include_parked=true", "include those messages anyway", examples["include_parked"], ""},
	{"vhost", "vhost=<vhost>", "the DLQ's vhost (default: the bot's)", examples["vhost"], ""},
	{"to", "to=<queue>", "replay every message to this queue instead of its source", examples["to"], ""},
	{"group", "group=<group>", "only one failure group, exactly: its id as a preview lists it (g and 12 hex digits), or its whole normalised text, quoted", examples["group"],
		"A failure group is the exception text with numbers, ids, timestamps, hex and UUIDs folded, or the dead-letter reason when there is no exception. A preview lists each group with its id and a button that previews just that group; unlike exception=, group= matches the whole group and nothing else."},
	{"header", "header.<name>=<value>", "only messages whose header <name> has exactly this value (the name as written, any case kept; numbers in decimal)", examples["header"], ""},
	{"replayed_by", "replayed_by=<replay>", "only the copies that came back from this replay: they carry its id and a new death (what check counts)", examples["replayed_by"], ""},
}

var paramHelp = []helpEntry{
	{"step", "step=<n>", "first step size (default 10); later steps double", examples["step"], ""},
	{"cap", "cap=<n>", "largest step (default 500); at least step", examples["cap"], ""},
	{"rate", "rate=<n>", "messages per second; rate=auto (the default) paces to the target's consumers; rate=max sends without pacing", examples["rate"],
		"rate=auto samples the target's ready count while it sends and works out what its consumers acknowledge from it, then keeps the backlog it adds under about two seconds of their acknowledgements; it slows when live traffic already fills the queue. When the target has no consumer or the broker cannot say, it sends at 50 messages per second. The replay's progress shows its current rate and why."},
	{"max", "max=<n>", "the most rate=auto sends, in messages per second (default 500)", examples["max"], ""},
	{"timeout", "timeout=<duration>", "how long a step may take to settle (default 60s), like 30s or 2m", examples["timeout"], ""},
	{"takeover", "takeover=yes", "send the previewed messages another running or paused replay owns from this one instead (that replay then leaves them; without it this replay leaves them to it)", examples["takeover"], ""},
}

const (
	accessOff = "Access control is off: anyone in the workspace can preview and replay."
	accessOn  = "Access control is on: a preview needs `read` on the DLQ; approving or replaying a token needs `replay` on the DLQ and `publish` on every target queue; pause needs `read`, cancel (which cannot be undone) needs `replay` on the DLQ, resume needs what approving needs. A second person may have to approve."
)

func reasonList() string {
	names := make([]string, len(Reasons))
	for i, r := range Reasons {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// topicAliases maps other names of help topics to theirs.
var topicAliases = map[string]string{
	"filter": "filters", "selection": "filters", "select": "filters",
	"param": "params", "parameters": "params", "parameter": "params",
	"permission": "permissions", "access": "permissions", "perms": "permissions",
}

// helpTopics lists every help topic.
func helpTopics() []string {
	t := append([]string{}, verbs...)
	t = append(t, "filters", "params", "permissions", "glossary")
	t = append(t, previewKeys...)
	t = append(t, "header")
	t = append(t, replayKeys...)
	return append(t, glossaryTopics()...)
}

// helpTopic returns the topic word names ("Reason=" is reason, "selection"
// is filters) and whether there is one.
func helpTopic(word string) (string, bool) {
	w := strings.TrimSuffix(strings.ToLower(word), "=")
	if strings.HasPrefix(w, headerPrefix) {
		w = "header" // help header.tenant=acme
	}
	w = strings.NewReplacer(" ", "_", "-", "_").Replace(strings.TrimSpace(w))
	if a, ok := topicAliases[w]; ok {
		w = a
	} else if a, ok := termAliases[w]; ok {
		w = a
	}
	return w, slices.Contains(helpTopics(), w)
}

// HelpAs renders help for the command prefix (DefaultPrefix for Slack's
// slash command): the short overview when command is "" (or not a topic),
// one line a command and the topics behind it, else the help on one
// subcommand, filter, replay parameter, the glossary or one of its terms.
// accessControl says whether a permissions file is loaded. With
// TerminalPrefix it also leaves out Slack's markup (bold headings,
// backticks) and mentions --json.
func HelpAs(prefix, command string, accessControl bool) string {
	var b strings.Builder
	topic, found := helpTopic(command)
	if command != "" && !found {
		b.WriteString("There is no help on `" + command + "`; here is all of it.\n\n")
	}
	if !found || topic == "" {
		writeFull(&b, prefix, accessControl)
	} else {
		writeTopic(&b, prefix, topic, accessControl)
	}
	out := strings.TrimRight(b.String(), "\n")
	if prefix == TerminalPrefix {
		out = plain(terminalWords(out))
	}
	return out
}

// slackOnly are phrases of the help that speak of Slack's buttons; the
// terminal's help leaves them out (it has commands, not buttons).
var slackOnly = []string{
	" (the preview's Approve button does the same)",
	" and a button that previews just that group",
}

// terminalWords removes the phrases about Slack's buttons.
func terminalWords(s string) string {
	for _, p := range slackOnly {
		s = strings.ReplaceAll(s, p, "")
	}
	return s
}

func writeFull(b *strings.Builder, prefix string, accessControl bool) {
	b.WriteString("*dlqbot* sends dead letters back safely: a preview that changes nothing, then an approved canary replay that stops by itself when copies come back.\n")
	var controls []string
	for _, e := range commandHelp {
		switch e.topic {
		case "help":
		case "pause", "resume", "cancel":
			controls = append(controls, "`"+prefix+" "+e.topic+" <replay>`")
		default:
			b.WriteString("• `" + prefix + " " + e.usage + "`: " + e.text + "\n")
		}
	}
	b.WriteString("• " + strings.Join(controls, " · ") + ": pause, resume or cancel a replay; unsent messages stay in the DLQ\n")
	b.WriteString(access(accessControl) + "\n")
	b.WriteString("More: `" + prefix + " help <command>`, `" + prefix + " help filters`, `" + prefix + " help params`, `" + prefix + " help glossary`, `" + prefix + " help permissions`\n")
	if prefix == TerminalPrefix {
		b.WriteString("Add --json anywhere on the line for exactly one JSON document on stdout, --verbose for dlqbot's log at info level and above on stderr (only warnings and errors otherwise); --details with preview for how it would run (the first step's read, the read budget, finding returns).\n")
	}
}

func writeSection(b *strings.Builder, prefix, title string, entries []helpEntry, commands bool) {
	b.WriteString(title + "\n")
	for _, e := range entries {
		usage, example := e.usage, e.example
		if commands {
			usage, example = prefix+" "+usage, prefix+" "+example
		}
		b.WriteString("• `" + usage + "`: " + e.text + ". Example: `" + example + "`\n")
	}
	b.WriteString("\n")
}

func writeTopic(b *strings.Builder, prefix, topic string, accessControl bool) {
	switch topic {
	case "filters":
		writeSection(b, prefix, "*Filters for preview (they combine with AND)*", filterHelp, false)
		b.WriteString("Example: `" + prefix + " preview orders.dlq reason=rejected since=2h limit=100`\n")
		return
	case "params":
		writeSection(b, prefix, "*Replay parameters*", paramHelp, false)
		b.WriteString("Example: `" + prefix + " replay <token> step=5 cap=200 rate=20 timeout=2m`\n")
		return
	case "permissions":
		b.WriteString(access(accessControl) + "\n")
		return
	case "glossary":
		writeGlossary(b)
		return
	}
	if writeTerm(b, prefix, topic) {
		return
	}
	for _, e := range commandHelp {
		if e.topic == topic {
			b.WriteString("`" + prefix + " " + e.usage + "`: " + e.text + ".\n")
			if e.more != "" {
				b.WriteString(e.more + "\n")
			}
			b.WriteString("Example: `" + prefix + " " + e.example + "`\n")
			switch topic {
			case "preview":
				b.WriteString("Filters: " + keyList(previewKeys) + " (" + prefix + " help filters).\n")
			case "replay":
				b.WriteString("Parameters: " + keyList(replayKeys) + " (" + prefix + " help params).\n")
			case "help":
				b.WriteString(access(accessControl) + "\n")
			}
			return
		}
	}
	for _, e := range slices.Concat(filterHelp, paramHelp) {
		if e.topic == topic {
			use := "preview orders.dlq "
			if slices.Contains(replayKeys, topic) {
				use = "replay <token> "
			}
			b.WriteString("`" + e.usage + "`: " + e.text + ".\n")
			b.WriteString("Example: `" + prefix + " " + use + e.example + "`\n")
			return
		}
	}
}

func keyList(keys []string) string { return strings.Join(keys, "= ") + "=" }

func access(accessControl bool) string {
	if accessControl {
		return accessOn
	}
	return accessOff
}

// plain removes Slack markup for a terminal: backticks, and the asterisks
// of lines that are bold headings.
func plain(s string) string {
	return boldMarkup.ReplaceAllString(strings.ReplaceAll(s, "`", ""), "$1$2$3")
}

// boldMarkup is Slack's *bold* around words, at word boundaries (a glob
// such as orders.* is left alone).
var boldMarkup = regexp.MustCompile(`(?m)(^|[\s•(])\*([^*\n]+)\*([\s:.,;)]|$)`)
