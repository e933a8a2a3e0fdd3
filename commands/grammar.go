package commands

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stroma/dlqbot/engine"
)

// Prefixes replies and help put before a command in examples.
const (
	// DefaultPrefix is the slash command's default name.
	DefaultPrefix = "/dlq"
	// TerminalPrefix is the terminal front end's name.
	TerminalPrefix = "dlqbot"
)

// Result is the outcome of parsing one command line: exactly one of Cmd and
// Reply is set. Reply is a user's mistake explained in a sentence that names
// the offending word and shows the right form; show it to the user as is
// (ephemeral in Slack, exit status 2 in the terminal).
type Result struct {
	Cmd   Command
	Reply string
}

// Flags are the terminal front end's options, accepted anywhere on the line.
type Flags struct {
	// JSON asks for exactly one JSON document on stdout (--json).
	JSON bool
	// Help asks for help (--help or -h); the Result is then a HelpCmd.
	Help bool
	// Follow asks status to follow a replay until it ends (--follow or -f).
	Follow bool
	// Verbose asks for dlqbot's log at info level and above on stderr
	// (--verbose or -v); without it only warnings and errors are logged.
	Verbose bool
	// Details asks preview for its mechanics too (--details): what the
	// first step reads, the read budget, how returns would be found.
	Details bool
}

// The keys each subcommand takes, in canonical order.
var (
	previewKeys = []string{"ids", "reason", "source", "since", "until", "exception", "limit", "park_after", "include_parked", "vhost", "to", "group", "replayed_by"}
	replayKeys  = []string{"step", "cap", "rate", "max", "timeout", "takeover"}
	verbs       = []string{"help", "list", "preview", "replay", "status", "pause", "resume", "cancel", "check"}
)

// keyAliases maps words people reach for to the key they meant.
var keyAliases = map[string]string{
	"id": "ids", "queue": "source", "from": "since", "after": "since",
	"before": "until", "error": "exception", "err": "exception", "max": "limit",
	"count": "limit", "target": "to", "dest": "to", "destination": "to",
	"parked": "include_parked", "pace": "rate", "speed": "rate", "wait": "timeout",
	"steps": "step", "max_step": "cap", "take_over": "takeover", "take-over": "takeover",
}

// verbAliases maps words people reach for to the subcommand they meant.
var verbAliases = map[string]string{
	"approve": "replay", "start": "replay", "run": "replay", "ls": "list",
	"show": "status", "stop": "pause` or `cancel", "peek": "preview",
	"inspect": "preview", "dry-run": "preview", "continue": "resume",
}

// examples shows one valid use of each key, for replies and help.
var examples = map[string]string{
	"ids": "ids=3f2a9c1b7e4d5a60,9b8c7d6e5f4a3b2c", "reason": "reason=rejected",
	"source": "source=orders", "since": "since=2h", "until": "until=2024-05-01T12:00:00Z",
	"exception": `exception="timeout while"`, "limit": "limit=100",
	"park_after": "park_after=5", "include_parked": "include_parked=true",
	"vhost": "vhost=prod", "to": "to=orders.scratch",
	"step": "step=5", "cap": "cap=200", "rate": "rate=20", "max": "rate=auto max=200", "timeout": "timeout=2m", "takeover": "takeover=yes",
	"group": "group=g3f2a9c1b7e4d", "replayed_by": "replayed_by=r_0123456789abcdef",
	"header": "header.tenant=acme",
}

// Parse parses the text of a /dlq slash command (what follows the command
// name) at time now, which resolves relative since=/until= values. Call
// UnescapeSlack on Slack's text field first. Empty text asks for help.
func Parse(text string, now time.Time) Result {
	return ParseAs(DefaultPrefix, text, now)
}

// ParseAs is Parse for a slash command with another name: prefix (such as
// "/dlq-prod") is how replies write the command in examples.
func ParseAs(prefix, text string, now time.Time) Result {
	p := &parser{prefix: prefix, now: now}
	if !utf8.ValidString(text) {
		return p.fail("The command is not valid UTF-8 text.")
	}
	toks, msg := tokenize(text)
	if msg != "" {
		return p.fail(msg)
	}
	return p.parse(toks)
}

// ParseArgs parses the terminal front end's arguments: os.Args[1:] (a
// leading program name "dlqbot" is skipped too). --json, --help (or -h),
// --follow (or -f), --verbose (or -v) and --details are taken out wherever they are and reported in
// Flags, even when the rest is a mistake; "--" ends the options. The shell has already split and
// unquoted the line, so a value with spaces is one argument.
func ParseArgs(args []string, now time.Time) (Result, Flags) {
	p := &parser{prefix: TerminalPrefix, now: now, fromArgs: true}
	var f Flags
	if len(args) > 0 && filepath.Base(args[0]) == TerminalPrefix {
		args = args[1:]
	}
	var toks []token
	var problem string
	options := true
	for _, a := range args {
		switch {
		case options && a == "--":
			options = false
		case options && (a == "--json" || a == "-json"):
			f.JSON = true
		case options && (a == "--help" || a == "-help" || a == "-h"):
			f.Help = true
		case options && (a == "--follow" || a == "-follow" || a == "-f"):
			f.Follow = true
		case options && (a == "--verbose" || a == "-verbose" || a == "-v"):
			f.Verbose = true
		case options && (a == "--details" || a == "-details"):
			f.Details = true
		case options && len(a) > 1 && a[0] == '-':
			if problem == "" {
				problem = fmt.Sprintf("Unknown option `%s`; %s accepts --json, --help, --follow, --verbose and --details (anywhere on the line).", a, TerminalPrefix)
			}
		case !utf8.ValidString(a):
			if problem == "" {
				problem = fmt.Sprintf("The argument %q is not valid UTF-8 text.", a)
			}
		default:
			toks = append(toks, argToken(a))
		}
	}
	if f.Help {
		topic := ""
		if len(toks) > 1 && strings.EqualFold(toks[0].value, "help") {
			toks = toks[1:] // dlqbot help preview --help
		}
		if len(toks) > 0 {
			word := toks[0].value
			if toks[0].eq {
				word = toks[0].key
			}
			if t, found := helpTopic(word); found {
				topic = t
			}
		}
		return Result{Cmd: HelpCmd{Topic: topic}}, f
	}
	if problem != "" {
		return p.fail(problem), f
	}
	return p.parse(toks), f
}

// parser carries what replies need: the prefix to show and the time.
type parser struct {
	prefix   string
	now      time.Time
	fromArgs bool
}

// fail returns msg as the reply. A quoted value can unescape to bytes that
// are not UTF-8 ("\xff"); they are replaced so the reply always is.
func (p *parser) fail(msg string) Result {
	return Result{Reply: strings.ToValidUTF8(msg, "\uFFFD")}
}

// try renders "Try: <prefix> <example>".
func (p *parser) try(example string) string { return "Try: " + p.prefix + " " + example }

// failTry joins a problem and an example into one reply.
func (p *parser) failTry(problem, example string) Result {
	return p.fail(sentence(problem) + " " + p.try(example))
}

// sentence ends s with a full stop unless it already ends a sentence.
func sentence(s string) string {
	if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "!") {
		return s
	}
	return s + "."
}

func ok(c Command) Result { return Result{Cmd: c} }

func (p *parser) parse(toks []token) Result {
	if len(toks) == 0 {
		return ok(HelpCmd{})
	}
	if !p.fromArgs {
		for _, t := range toks {
			if !t.eq && strings.HasPrefix(t.value, "--") {
				return p.fail(fmt.Sprintf("`%s` is an option of the terminal front end (%s %s …); leave it out here.", t.value, TerminalPrefix, t.value))
			}
		}
	}
	first, args := toks[0], toks[1:]
	if first.eq {
		if slices.Contains(previewKeys, first.key) {
			return p.failTry(fmt.Sprintf("Start with a command: `%s` is a filter, and filters follow the DLQ", first.raw), "preview orders.dlq "+first.raw)
		}
		return p.failTry(fmt.Sprintf("Start with a command such as preview or replay, not `%s`", first.raw), "help")
	}
	verb := strings.ToLower(first.value)
	switch verb {
	case "help":
		return p.help(args)
	case "list":
		if len(args) > 0 {
			return p.failTry(fmt.Sprintf("list takes nothing after it, but got `%s`", args[0].raw), "list")
		}
		return ok(ListCmd{})
	case "preview":
		return p.preview(args)
	case "replay":
		return p.replay(args)
	case "status":
		id, r := p.replayID(verb, args, true)
		if r.Reply != "" {
			return r
		}
		return ok(StatusCmd{ReplayID: id})
	case "pause", "resume", "cancel", "check":
		resend := ""
		if verb == "resume" {
			var r Result
			if resend, args, r = p.resend(args); r.Reply != "" {
				return r
			}
		}
		id, r := p.replayID(verb, args, false)
		if r.Reply != "" {
			return r
		}
		switch verb {
		case "pause":
			return ok(PauseCmd{ReplayID: id})
		case "resume":
			return ok(ResumeCmd{ReplayID: id, Resend: resend})
		case "cancel":
			return ok(CancelCmd{ReplayID: id})
		}
		return ok(CheckCmd{ReplayID: id})
	}
	msg := fmt.Sprintf("Unknown command `%s`", first.value)
	if s := verbAliases[verb]; s != "" {
		msg += fmt.Sprintf("; did you mean `%s`?", s)
	} else if s := suggest(verb, verbs); s != "" {
		msg += fmt.Sprintf("; did you mean `%s`?", s)
	} else {
		msg += "; the commands are " + strings.Join(verbs, ", ")
	}
	return p.failTry(msg, "help")
}

func (p *parser) help(args []token) Result {
	if len(args) > 1 {
		words := make([]string, len(args))
		for i, a := range args {
			words[i] = a.value
		}
		if topic, found := helpTopic(strings.Join(words, " ")); found {
			return ok(HelpCmd{Topic: topic}) // a term of more than one word: "help came back"
		}
		return p.failTry(fmt.Sprintf("help takes one topic, but got `%s` too", args[1].raw), "help "+args[0].value)
	}
	if len(args) == 0 {
		return ok(HelpCmd{})
	}
	word := args[0].value
	if args[0].eq {
		word = args[0].key // "help reason=" and "help reason=x" ask about reason=
	}
	if topic, found := helpTopic(word); found {
		return ok(HelpCmd{Topic: topic})
	}
	msg := fmt.Sprintf("There is no help on `%s`", word)
	if s := suggest(strings.ToLower(word), helpTopics()); s != "" {
		msg += fmt.Sprintf("; did you mean `%s`?", s)
	}
	return p.failTry(msg, "help preview")
}

// resend takes resume's one parameter, resend=in-doubt, out of args.
func (p *parser) resend(args []token) (string, []token, Result) {
	var rest []token
	resend := ""
	for _, t := range args {
		if !t.eq || t.key != "resend" {
			rest = append(rest, t)
			continue
		}
		if t.value != engine.ResendInDoubt {
			return "", nil, p.failTry(fmt.Sprintf("`resend=` takes one value, `%s` (send the copies in doubt again), not `%s`", engine.ResendInDoubt, t.value), "resume <replay> resend="+engine.ResendInDoubt)
		}
		resend = t.value
	}
	return resend, rest, Result{}
}

// replayID reads the single replay id of status, pause, resume, cancel and
// check (optional for status).
func (p *parser) replayID(verb string, args []token, optional bool) (string, Result) {
	example := verb + " <replay>"
	id := ""
	for _, t := range args {
		if t.eq {
			return "", p.badKey(t, verb, nil, example)
		}
		if id != "" {
			return "", p.failTry(fmt.Sprintf("%s takes one replay id, but `%s` follows `%s`", verb, t.raw, id), verb+" "+id)
		}
		if msg := checkOpaque("replay id", t.value); msg != "" {
			return "", p.failTry(msg+"; "+p.prefix+" status lists the replays", example)
		}
		id = t.value
	}
	if id == "" && !optional {
		return "", p.failTry(fmt.Sprintf("%s needs a replay id (%s status lists them)", verb, p.prefix), example)
	}
	return id, Result{}
}

// badKey explains a key=value that verb does not take.
func (p *parser) badKey(t token, verb string, allowed []string, example string) Result {
	if t.key == "" {
		return p.failTry(fmt.Sprintf("`%s` has no name before the `=`", t.raw), example)
	}
	key := "`" + t.key + "=`"
	switch {
	case verb == "replay" && slices.Contains(previewKeys, t.key):
		return p.failTry(key+" is a preview filter, but a replay sends exactly the messages its preview froze; to change the selection, preview again", "preview orders.dlq "+examples[t.key])
	case verb == "preview" && slices.Contains(replayKeys, t.key):
		return p.failTry(key+" is a replay parameter; give it when you start the replay from the preview's token", "replay <token> "+examples[t.key])
	case len(allowed) == 0:
		return p.failTry(fmt.Sprintf("%s takes no key=value options, but got `%s`", verb, t.raw), example)
	}
	kind := "filter"
	if verb == "replay" {
		kind = "parameter"
	}
	msg := fmt.Sprintf("Unknown %s %s", kind, key)
	s := keyAliases[t.key]
	if !slices.Contains(allowed, s) {
		s = suggest(t.key, allowed)
	}
	if s != "" {
		msg += fmt.Sprintf("; did you mean `%s=`?", s)
		fixed := examples[s]
		if t.value != "" && !strings.ContainsAny(t.value, " \t\"") {
			fixed = s + "=" + t.value
		}
		example = strings.Replace(example, "<example>", fixed, 1)
	} else {
		msg += fmt.Sprintf("; %s takes %s=", verb, strings.Join(allowed, "=, "))
		typical := "reason"
		if verb == "replay" {
			typical = "step"
		}
		example = strings.Replace(example, "<example>", examples[typical], 1)
	}
	return p.failTry(msg, example)
}

// sameKey is the reply for a key given twice.
func (p *parser) sameKey(first, second token, example string) Result {
	return p.failTry(fmt.Sprintf("`%s=` is given twice (`%s` and `%s`); give it once", first.key, first.raw, second.raw), example)
}

// checkParams applies the rules between step and cap, given the defaults,
// and returns the problem with the parameters that would fix it.
func checkParams(prm engine.Params) (string, string) {
	switch {
	case prm.Step > 0 && prm.Cap > 0 && prm.Cap < prm.Step:
		return fmt.Sprintf("`cap=%d` is below `step=%d`; the cap is the largest step, so it must be at least the first one", prm.Cap, prm.Step),
			fmt.Sprintf("step=%d cap=%d", prm.Step, prm.Step)
	case prm.Cap == 0 && prm.Step > DefaultCap:
		return fmt.Sprintf("`step=%d` is above the default cap of %d; raise the cap too", prm.Step, DefaultCap),
			fmt.Sprintf("step=%d cap=%d", prm.Step, prm.Step)
	case prm.Max > 0 && !prm.Auto && prm.Rate != 0:
		return "`max=` is the most `rate=auto` may send; with a fixed rate= or rate=max it means nothing — drop one of them",
			fmt.Sprintf("rate=auto max=%s", strconv.FormatFloat(prm.Max, 'f', -1, 64))
	case prm.Step == 0 && prm.Cap > 0 && prm.Cap < DefaultStep:
		return fmt.Sprintf("`cap=%d` is below the default first step of %d; lower the step too", prm.Cap, DefaultStep),
			fmt.Sprintf("step=%d cap=%d", prm.Cap, prm.Cap)
	}
	return "", ""
}
