package blocks

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/engine"
)

// maxFineNamed is how many targets without a concern the preview's card
// names; more are counted.
const maxFineNamed = 3

// concern reports whether a target wants a look before a replay: it does
// not exist, has no consumers, kept its consumers since the failures, or
// its name mixes scripts.
func concern(t engine.TargetView) bool {
	return !t.Exists || t.Consumers == 0 || t.ConsumersSinceFailure == engine.SinceUnchanged || engine.MixedScripts(t.Queue) != ""
}

// targetsCard is what the preview's card says of its targets: a line for
// each target with a concern that no problem line names already (and for
// each name that mixes scripts), then one line for the rest ("3 target
// queues, all with consumers: …"), naming them when there are at most
// maxFineNamed. Each target's consumers, restart times and reasons are in
// the details (targetsText). "" when there are no targets.
func targetsCard(p *engine.Preview) string {
	if len(p.Targets) == 0 {
		return ""
	}
	named := problemNamed(p)
	var lines []string
	var fine []engine.TargetView
	for _, t := range engine.ConcernFirst(p.Targets) {
		switch {
		case !concern(t):
			fine = append(fine, t)
		case !named[t.Queue] || engine.MixedScripts(t.Queue) != "":
			lines = append(lines, cardTargetLine(t))
		}
	}
	cut := ""
	if TargetsCut(p.Targets) {
		cut = " — *Show samples* lists every target"
	}
	shown := lines[:min(len(lines), maxTargets)]
	var rest string
	switch n := len(fine); {
	case n == 0:
	case n == len(p.Targets) && n == 1:
		rest = ":white_check_mark: Target " + queueNames(fine) + " has consumers"
	case n == len(p.Targets) && n <= maxFineNamed:
		rest = fmt.Sprintf(":white_check_mark: %s, all with consumers: %s", plural(n, "target queue", "target queues"), queueNames(fine))
	case n == len(p.Targets):
		rest = fmt.Sprintf(":white_check_mark: %s, all with consumers", plural(n, "target queue", "target queues"))
	case n <= maxFineNamed:
		rest = ":white_check_mark: " + queueNames(fine) + " " + pick(n, "has", "have") + " consumers"
	default:
		rest = fmt.Sprintf(":white_check_mark: %s %s consumers", plural(n, "other target queue", "other target queues"), pick(n, "has", "have"))
	}
	if rest != "" {
		shown = append(shown, rest+cut)
		cut = ""
	}
	hidden := len(lines) - min(len(lines), maxTargets)
	return list("", shown, len(shown)+hidden, MaxSectionText, func(n int) string {
		return "…and " + plural(n, "more target queue", "more target queues") + cut
	})
}

// problemNamed is the set of target queues p's problem lines name.
func problemNamed(p *engine.Preview) map[string]bool {
	named := map[string]bool{}
	count := map[engine.ProblemKind]int{}
	for _, pr := range p.Problems {
		switch pr.Kind {
		case engine.ProblemTargetMissing, engine.ProblemNoConsumers, engine.ProblemConsumersUnchanged:
			if count[pr.Kind] < maxProblemQueues {
				named[pr.Queue] = true
			}
			count[pr.Kind]++
		}
	}
	return named
}

// cardTargetLine is a target's line on the card: its concern and how many
// messages would go there.
func cardTargetLine(t engine.TargetView) string {
	name := code(t.Queue, maxTargetName)
	var s string
	switch {
	case !t.Exists:
		s = ":x: " + name + " *does not exist*"
	case t.Consumers == 0:
		s = ":warning: " + name + " has *no consumers*"
	case t.ConsumersSinceFailure == engine.SinceUnchanged:
		s = ":rotating_light: " + name + ": consumers *not restarted since the failures*"
	default:
		s = ":warning: " + name
	}
	if m := engine.MixedScripts(t.Queue); m != "" {
		s += " · *mixes " + m + " letters*: check the name"
	}
	return s + " · " + msgs(t.Messages)
}

// queueNames names targets in code: "`a`, `b` and `c`".
func queueNames(ts []engine.TargetView) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = code(t.Queue, maxTargetName)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// targetsText lists every target for the preview's details, those with
// concerns first, with its consumers, restart times and reasons: the
// first maxTargets, then "+N more" pointing at Show samples, whose private
// answer lists every target (TargetList).
func targetsText(targets []engine.TargetView) string {
	ts := engine.ConcernFirst(targets)
	lines := make([]string, 0, maxTargets)
	for _, t := range ts[:min(len(ts), maxTargets)] {
		lines = append(lines, targetLine(t))
	}
	head := fmt.Sprintf("*Targets* (%s)", plural(len(ts), "queue", "queues"))
	return list(head, lines, len(ts), MaxSectionText, func(hidden int) string {
		n := 0
		for _, t := range ts[len(ts)-hidden:] {
			n += t.Messages
		}
		return fmt.Sprintf("*+%s* (%s) — *Show samples* lists every target", plural(hidden, "more queue", "more queues"), msgs(n))
	})
}

// TargetsCut reports whether the preview's card leaves out any target or
// any part of a target's name (the private answer to Show samples then
// lists them all): it names at most maxFineNamed targets without a
// concern and maxTargets with one.
func TargetsCut(targets []engine.TargetView) bool {
	fine, concerns := 0, 0
	for _, t := range targets {
		if utf8.RuneCountInString(t.Queue) > maxTargetName || engine.MixedScripts(t.Queue) != "" {
			return true
		}
		if concern(t) {
			concerns++
		} else {
			fine++
		}
	}
	return fine > maxFineNamed || concerns > maxTargets
}

// maxTargetName is how much of a target's name a channel line shows.
const maxTargetName = 120

// maxTargetSections caps the sections TargetList's private answer uses
// (a message holds at most 50 blocks); a preview with more targets than
// fit names them in its message list (the CSV in the requester's DM).
const maxTargetSections = 30

// targetListBlocks lists every target of a preview for a reader, one line
// each with the whole name quoted, in sections that fit Slack's limits.
func targetListBlocks(targets []engine.TargetView) []slack.Block {
	ts := engine.ConcernFirst(targets)
	var out []slack.Block
	var b strings.Builder
	fmt.Fprintf(&b, "*Every target* (%s)", plural(len(ts), "queue", "queues"))
	for i, t := range ts {
		l := "• " + fullTargetLine(t)
		if utf8.RuneCountInString(b.String())+utf8.RuneCountInString(l)+1 > MaxSectionText-200 {
			if len(out) == maxTargetSections-1 {
				fmt.Fprintf(&b, "\n*+%s*: the message list names each message's target.", plural(len(ts)-i, "more queue", "more queues"))
				break
			}
			out = append(out, section(b.String()))
			b.Reset()
		} else {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return append(out, section(b.String()))
}

// fullTargetLine is a target's line with its name whole: quoted with Go
// escapes when it is not plain printable text.
func fullTargetLine(t engine.TargetView) string {
	name := code(t.Queue, 300)
	if q := strconv.QuoteToASCII(t.Queue); q[1:len(q)-1] != t.Queue {
		name += " (" + code(q, 600) + ")"
	}
	s := name + " — " + msgs(t.Messages)
	switch {
	case !t.Exists:
		s += ", *does not exist*"
	case t.Consumers == 0:
		s += ", *no consumers*"
	}
	if m := engine.MixedScripts(t.Queue); m != "" {
		s += " · :warning: mixes " + m + " letters"
	}
	return s
}

func targetLine(t engine.TargetView) string {
	name := code(t.Queue, maxTargetName)
	if utf8.RuneCountInString(t.Queue) > maxTargetName {
		name += " (name cut; *Show samples* shows it whole)"
	}
	if m := engine.MixedScripts(t.Queue); m != "" {
		name += " :warning: *mixes " + m + " letters*: check the name"
	}
	state := ":white_check_mark: " + name + " — " + plural(t.Consumers, "consumer", "consumers")
	switch {
	case !t.Exists:
		state = ":x: " + name + " — *does not exist*"
	case t.Consumers == 0:
		state = ":warning: " + name + " — *no consumers*"
	case t.ConsumersSinceFailure == engine.SinceUnchanged:
		state = ":rotating_light: " + name + " — " + plural(t.Consumers, "consumer", "consumers") + ", *not restarted since the failures*" + sinceTimes(t)
	case t.ConsumersSinceFailure == engine.SinceRestarted:
		state += ", restarted since the failures" + sinceTimes(t)
	}
	return state + " · " + msgs(t.Messages) + reasons(t.Reasons)
}

// maxConnTimes is how many distinct connection times a target's line
// shows.
const maxConnTimes = 3

// sinceTimes gives what a target's restarted/unchanged verdict was judged
// from, as the terminal's targets table does: " (latest failure …;
// connected …)", and the client the consumers connected after the failure
// name themselves by ("" when the preview kept neither time: a token
// keeps the verdict alone).
func sinceTimes(t engine.TargetView) string {
	var parts, times []string
	if !t.LastFailure.IsZero() {
		parts = append(parts, "latest failure "+dateSecs(t.LastFailure))
	}
	var seen []time.Time
	var after []engine.ConsumerConn
	for _, c := range t.ConsumerConns {
		if c.ConnectedAt.IsZero() {
			continue
		}
		if !t.LastFailure.IsZero() && c.ConnectedAt.After(t.LastFailure) {
			after = append(after, c)
		}
		if !slices.ContainsFunc(seen, c.ConnectedAt.Equal) {
			seen = append(seen, c.ConnectedAt)
		}
	}
	slices.SortFunc(seen, time.Time.Compare)
	for _, at := range seen[:min(len(seen), maxConnTimes)] {
		times = append(times, dateSecs(at))
	}
	if len(seen) > maxConnTimes {
		times = append(times, "+"+num(len(seen)-maxConnTimes)+" more")
	}
	if len(times) > 0 {
		parts = append(parts, "connected "+strings.Join(times, ", "))
	}
	if client := clientNames(after); client != "" {
		parts = append(parts, "restarted as "+client)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// unchangedLine words the targets whose consumers were all connected
// before their messages failed: "`orders`: its 3 consumers have been
// connected since before these messages failed — is the fix deployed?",
// with the client's name and version where it gives them.
func unchangedLine(prs []engine.Problem, targets []engine.TargetView) string {
	var parts []string
	for _, pr := range prs[:min(len(prs), maxProblemQueues)] {
		n, client := 0, ""
		for _, t := range targets {
			if t.Queue == pr.Queue {
				n, client = len(t.ConsumerConns), clientNames(t.ConsumerConns)
				if n == 0 {
					n = t.Consumers // a token keeps the count, not the connections
				}
			}
		}
		who := "its consumers have"
		switch {
		case n == 1:
			who = "its consumer has"
		case n > 1:
			who = "its " + num(n) + " consumers have"
		}
		part := code(pr.Queue, 60) + ": " + who + " been connected since before these messages failed"
		if client != "" {
			part += " (" + client + ")"
		}
		parts = append(parts, part)
	}
	s := ":rotating_light: *Consumers not restarted* — " + strings.Join(parts, "; ")
	if rest := len(prs) - len(parts); rest > 0 {
		s += " and " + plural(rest, "more queue", "more queues") + " like it"
	}
	return s + " — is the fix deployed?"
}

// clientNames lists the distinct "product version" the consumers'
// clients name themselves by, at most three ("" when none does).
func clientNames(conns []engine.ConsumerConn) string {
	var names []string
	for _, c := range conns {
		n := strings.TrimSpace(oneLine(c.Product + " " + c.Version))
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) > 3 {
		names = append(names[:3], "…")
	}
	return esc(strings.Join(names, ", "), 200)
}

// reasons lists dead-letter reasons by count: " (100 rejected, 20 expired)".
func reasons(rs map[engine.Reason]int) string {
	type rc struct {
		r engine.Reason
		n int
	}
	var all []rc
	for r, n := range rs {
		all = append(all, rc{r, n})
	}
	if len(all) == 0 {
		return ""
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].r < all[j].r
	})
	var parts []string
	for _, x := range all[:min(len(all), 3)] {
		parts = append(parts, num(x.n)+" "+esc(oneLine(string(x.r)), 30))
	}
	if len(all) > 3 {
		parts = append(parts, plural(len(all)-3, "more reason", "more reasons"))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
