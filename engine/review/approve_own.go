package review

import (
	"context"
	"fmt"
	"github.com/stroma/dlqbot/engine"
	"maps"
	"slices"
	"sort"
)

// Who owns a previewed message. A message of a DLQ belongs to
// at most one replay at a time, recorded in Deps.Claims:
//   - at approval, a replay owns the previewed ids no other replay owns:
//     of two overlapping previews the first approved owns the overlap
//     (even while it is paused or stopped), and the second leaves it to it
//     (Change held_by_replay; its run reports those ids "left to r_…");
//   - an approval with Params.TakeOver takes over what another replay owns
//     and has neither sent nor claimed for the step it is sending now: the
//     other replay then leaves those ids, "taken over by r_…";
//   - a step claims its picks before it sends them, and afterwards what it
//     sent is sent and the rest stays owned by it;
//   - ownership by a replay that stopped or ended (stopped, finished,
//     cancelled, interrupted: State.Yields) lapses: a later approval takes
//     over what it owned and had not sent, without a confirm step, and
//     both say so (the new one's TakenFrom, "taken over from r_…"; the
//     old one's LeftTo and note, "left to r_…"). The workflow replay,
//     stop, fix the consumer, preview again, replay needs no takeover=yes.
// So a paused replay keeps what it planned: a replay running beside it
// sends none of it ("left to r_…", not missing), and what the paused one
// already sent is "replayed by r_…".

// liveHolders keeps of held (id → who holds it) the claims that count at
// an approval: sends, claims and the ownership of replays that keep it
// (queued, running, paused). lapsed lists the replays whose ownership
// lapsed (stopped or ended: State.Yields).
func (s *Base) LiveHolders(ctx context.Context, held map[string]engine.Claim) (map[string]engine.Claim, []string, error) {
	state := map[string]engine.State{}
	for _, cl := range held {
		if !cl.Owned {
			continue
		}
		if _, ok := state[cl.Replay]; ok {
			continue
		}
		r, err := s.d.Replays.Get(ctx, cl.Replay)
		if err != nil {
			// Unknown (expired record): its ownership lapsed with it.
			state[cl.Replay] = engine.StateFinished
			continue
		}
		state[cl.Replay] = r.State
	}
	var lapsed []string
	for rid, st := range state {
		if st.Yields() {
			lapsed = append(lapsed, rid)
		}
	}
	slices.Sort(lapsed)
	out := make(map[string]engine.Claim, len(held))
	for id, cl := range held {
		if cl.Owned && state[cl.Replay].Yields() {
			continue
		}
		out[id] = cl
	}
	return out, lapsed, nil
}

// heldByReplays words, one change per replay, the previewed messages
// (want: id → copies) that other replays are sending now or own: an
// approval replays only the rest, or with takeOver also what they own.
func heldByReplays(held map[string]engine.Claim, want map[string]int, takeOver bool) []engine.Change {
	sending, owned := map[string]int{}, map[string]int{}
	for id, cl := range held {
		switch {
		case cl.Sent:
		case cl.Owned:
			owned[cl.Replay] += want[id]
		default:
			sending[cl.Replay] += want[id]
		}
	}
	var out []engine.Change
	for rid, n := range sending {
		out = append(out, engine.Change{Kind: engine.ChangeHeldByReplay, Messages: n, Replay: rid,
			Detail: fmt.Sprintf("%d previewed message(s) are being sent by replay %s now: approved, this replay leaves them to it and sends only the rest", n, rid)})
	}
	for rid, n := range owned {
		d := fmt.Sprintf("%d previewed message(s) belong to replay %s (approved before this one, not sent yet): approved, this replay leaves them to it and sends only the rest; approve with takeover=yes to send them from this replay instead", n, rid)
		if takeOver {
			d = fmt.Sprintf("%d previewed message(s) belong to replay %s (approved before this one, not sent yet): this approval takes them over (takeover=yes), so this replay sends them and %s will not", n, rid, rid)
		}
		out = append(out, engine.Change{Kind: engine.ChangeHeldByReplay, Messages: n, Replay: rid, Owned: true, TakeOver: takeOver, Detail: d})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Detail < out[j].Detail })
	return out
}

// own makes the approved replay r the owner of its previewed messages
// that no other replay owns (with r.Params.TakeOver, also of those that
// other replays own but neither sent nor are sending), and records in
// r.TookOver what it took from whom. Past Config.Tune.OwnAtApproval it leaves the
// rest to the runs (r.OwnFrom).
func (s *Service) own(ctx context.Context, f engine.Frozen, r *engine.Replay, lapsed []string) error {
	items := f.Items // the first OwnAtApproval or more, all of them for a take-over
	if n := s.cfg.Tune.OwnAtApproval; !r.Params.TakeOver && max(f.Distinct, len(items)) > n {
		items, r.OwnFrom = items[:min(n, len(items))], n
	}
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	_, taken, err := s.d.Claims.Own(ctx, f.DLQ, r.ID, ids, f.CreatedAt, r.Params.TakeOver, lapsed)
	if err != nil {
		return err
	}
	if len(taken) == 0 {
		return nil
	}
	copies := make(map[string]int, len(f.Items))
	for _, it := range f.Items {
		copies[it.ID] += it.Count
	}
	for id, cl := range taken {
		by := &r.TookOver
		if slices.Contains(lapsed, cl.Replay) {
			by = &r.TakenFrom // it had stopped or ended: no confirm asked
		}
		if *by == nil {
			*by = map[string]int{}
		}
		(*by)[cl.Replay] += copies[id]
	}
	return nil
}

// leftTo records on each replay r took messages from (r.TakenFrom) that
// it left them to r: its LeftTo, and its note, which is what its status
// shows. The record is written only while no run holds its lease (it has
// stopped or ended); one that a resume runs meanwhile still leaves those
// messages (its claims are refused, "taken over by r_…"), only its record
// does not say so in sum.
func (s *Base) LeftTo(ctx context.Context, r engine.Replay) {
	for _, old := range slices.Sorted(maps.Keys(r.TakenFrom)) {
		n := r.TakenFrom[old]
		err := s.d.Replays.UpdateUnowned(ctx, old, func(cur *engine.Replay) error {
			if cur.LeftTo == nil {
				cur.LeftTo = map[string]int{}
			}
			cur.LeftTo[r.ID] += n
			cur.Note += "; " + leftToWords(r.ID, n, cur.State)
			return nil
		})
		if err != nil {
			s.Warn(old, r.DLQ, "record what "+r.ID+" took over", err)
		}
	}
}

// leftToWords says that n messages a replay in state st owned were left
// to the replay to.
func leftToWords(to string, n int, st engine.State) string {
	return fmt.Sprintf("left to %s: %d message(s) this replay had not sent (the approval of %s took them over while this one was %s; it sends them, this one does not)", to, n, to, st)
}
