package engine

import (
	"fmt"
	"slices"
	"strings"
)

// words says who holds a message: "replayed by r_…", "being replayed by
// r_…", "left to r_…" (it owns it) or "taken over by r_…".
func (cl Claim) Words() string {
	if cl.TakenOver {
		switch {
		case cl.Sent:
			return "taken over by " + cl.Replay + ", which sent it (its approval took it over; not sent by this one)"
		case cl.Owned:
			return "taken over by " + cl.Replay + " (its approval took it over: it sends it, this one does not)"
		}
		return "taken over by " + cl.Replay + ", which is sending it (its approval took it over; not sent by this one)"
	}
	if cl.Owned {
		return "left to " + cl.Replay + " (it owned it when this replay was approved, and sends it; not sent by this one)"
	}
	if cl.Sent {
		return "replayed by " + cl.Replay + " (another dlqbot replay sent it; not sent again)"
	}
	return "being replayed by " + cl.Replay + " (another dlqbot replay claimed it for the step it is sending; not sent by this one)"
}

// elsewhereWords words the previewed messages other dlqbot replays sent,
// are sending, own or took over, naming them per verb, and what this
// replay took over ("" when none).
func elsewhereWords(r Replay) string {
	s := ""
	if tw := TakeOverWords(r); tw != "" {
		s = "; " + tw
	}
	if r.Elsewhere == 0 {
		return s
	}
	verbs := []string{"replayed by", "being replayed by", "left to", "taken over by"}
	by := map[string][]string{}
	for _, f := range r.Failures {
		if f.Kind != FailureReplayedElsewhere {
			continue
		}
		for _, v := range verbs {
			rest, ok := strings.CutPrefix(f.Detail, v+" ")
			if !ok {
				continue
			}
			id, _, _ := strings.Cut(rest, " ")
			id = strings.TrimSuffix(id, ",")
			if !slices.Contains(by[v], id) {
				by[v] = append(by[v], id)
			}
			break
		}
	}
	var who []string
	for _, v := range verbs {
		if len(by[v]) > 0 {
			who = append(who, v+" "+strings.Join(by[v], ", "))
		}
	}
	w := "another dlqbot replay"
	if len(who) > 0 {
		w = strings.Join(who, "; ")
	}
	return s + fmt.Sprintf("; %d left to other dlqbot replays — %s (their previews overlapped this one; not sent by this one, not missing)", r.Elsewhere, w)
}

// Who names the replays: "replay r_…" or "replays r_…, r_…".
func (h HeldBy) Who() string {
	if len(h.Replays) == 1 {
		return "replay " + h.Replays[0]
	}
	return "replays " + strings.Join(h.Replays, ", ")
}

// Words says what the replays held: "40 held by replay r_…" ("messages
// held by replays r_…, r_…" when the count is not known).
func (h HeldBy) Words() string {
	who := h.Who()
	if h.Messages == 0 {
		return "messages held by " + who
	}
	return fmt.Sprintf("%d held by %s", h.Messages, who)
}

// HeldBy is how many messages of a DLQ a read (a preview, a compare, a
// check) could not see while dlqbot replays' reads held messages of it,
// and which replays those were.
type HeldBy struct {
	Replays  []string `json:"replay_ids"`
	Messages int      `json:"messages"`
}
