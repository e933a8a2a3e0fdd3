package review

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/letter"
)

// Compare reports what changed since the token's preview: previewed
// messages gone from the DLQ or sent by another replay since, targets
// deleted, targets that lost all their consumers. It changes nothing.
// The Frozen it returns holds the first previewed items only, or a few
// more (Distinct says how many there are): the ones an approval owns.
func (s *Service) Compare(ctx context.Context, token string) (engine.Frozen, []engine.Change, error) {
	f, changes, _, err := s.compare(ctx, token, false, "")
	return f, changes, err
}

// compare is Compare, wording the overlap with other replays for an
// approval that takes it over (takeOver: f then holds every previewed
// item) or not (the first Config.Tune.OwnAtApproval or more); lapsed are the
// replays that own previewed messages but ended (their ownership lapses).
// keep, when set, is the id of the replay an approval would create: a read
// of the DLQ that finds every previewed message is kept for its run
// (scanKeeping).
func (s *Service) compare(ctx context.Context, token string, takeOver bool, keep string) (f engine.Frozen, changes []engine.Change, lapsed []string, err error) {
	defer func() {
		if err != nil {
			changes, lapsed = nil, nil
		}
	}()
	first := s.cfg.Tune.OwnAtApproval
	if takeOver {
		first = -1 // a take-over owns every id at once (approve_own.go)
	}
	f, items, err := s.loadApprovalPreview(ctx, token, first)
	if err != nil {
		return engine.Frozen{}, nil, nil, fmt.Errorf("engine: compare %s: %w", token, err)
	}
	if changes, err = s.targetChanges(ctx, token, f.Targets); err != nil {
		return f, nil, nil, err
	}
	// What other dlqbot replays sent or hold is read from the store while
	// the broker proves the DLQ unchanged: neither waits for the other (at
	// 100,000 ids the two reads took as long as the proof).
	others := s.othersAsync(ctx, f, items)
	// The DLQ is read only when the broker cannot prove that no previewed
	// message left it (package proof).
	if s.cfg.Tune.CompareAlways || !s.prover.Prove(ctx, proofPreview(f)) {
		<-others
		all, err := items.load(ctx)
		if err != nil {
			return f, nil, nil, fmt.Errorf("engine: compare %s: %w", token, err)
		}
		want := make(map[string]int, len(all))
		for _, it := range all {
			want[it.ID] = it.Count
		}
		found, cov, held, err := s.findPreviewed(ctx, f.DLQ, want, keep)
		if err != nil {
			return f, nil, nil, fmt.Errorf("engine: compare %s: scan %s: %w", token, f.DLQ, err)
		}
		changes = append(changes, goneChanges(f.DLQ, want, found, cov, held)...)
		// A read takes long: what other replays did meanwhile is read after it.
		others = s.othersAsync(ctx, f, items)
	}
	o := <-others
	if o.err != nil {
		return f, nil, nil, fmt.Errorf("engine: compare %s: %w", token, o.err)
	}
	var all []engine.Item
	if len(o.hist)+len(o.held) > 0 {
		if all, err = items.load(ctx); err != nil {
			return f, nil, nil, fmt.Errorf("engine: compare %s: %w", token, err)
		}
	}
	copies := copiesOf(all, o.hist, o.held)
	again := 0
	for id, sends := range o.hist {
		for _, h := range sends {
			if h.At.After(f.CreatedAt) {
				again += copies[id]
				break
			}
		}
	}
	if again > 0 {
		changes = append(changes, engine.Change{Kind: engine.ChangeReplayedElsewhere, Messages: again,
			Detail: fmt.Sprintf("%d previewed message(s) were sent by another replay after this preview", again)})
	}
	changes = append(changes, heldByReplays(o.held, copies, takeOver)...)
	lapsed = o.lapsed
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Kind < changes[j].Kind })
	return f, changes, lapsed, nil
}

// targetChanges reports the targets deleted, or left without consumers,
// since the preview (targets: as it saw them), for compare of token.
func (s *Service) targetChanges(ctx context.Context, token string, targets []engine.TargetSnapshot) ([]engine.Change, error) {
	var changes []engine.Change
	for _, t := range targets {
		st, err := s.d.Broker.Inspect(ctx, t.Queue)
		if err != nil {
			return nil, fmt.Errorf("engine: compare %s: inspect %s: %w", token, t.Queue, err)
		}
		switch {
		case t.Exists && !st.Exists:
			changes = append(changes, engine.Change{Kind: engine.ChangeTargetDeleted, Queue: t.Queue, Messages: t.Messages,
				Detail: fmt.Sprintf("target queue %s was deleted since the preview", t.Queue)})
		case t.Consumers > 0 && st.Exists && st.Consumers == 0:
			changes = append(changes, engine.Change{Kind: engine.ChangeConsumersGone, Queue: t.Queue, Messages: t.Messages,
				Detail: fmt.Sprintf("target queue %s had %d consumer(s) at the preview and has none now", t.Queue, t.Consumers)})
		}
	}
	return changes, nil
}

// goneChanges words what a compare's read did not find of the previewed
// messages (want and found: id → copies; cov: how much the read saw;
// held: the dlqbot replays whose reads held messages it could not see).
func goneChanges(dlq string, want, found map[string]int, cov engine.Coverage, held *engine.HeldBy) []engine.Change {
	gone := 0
	for id, n := range want {
		gone += n - found[id]
	}
	if gone == 0 {
		return nil
	}
	d := fmt.Sprintf("%d previewed message(s) are no longer in %s (consumed, moved or replayed since); they would be reported missing", gone, dlq)
	switch {
	case held != nil && held.Messages >= gone:
		// Held by dlqbot replays' reads, as many as are not found: not a
		// change. The replay's steps look for them (and the replay holding
		// them gives them back), and call none missing unless a whole read
		// does not find them.
		return nil
	case held != nil:
		d = fmt.Sprintf("%d previewed message(s) were not found in %s while dlqbot %s read it (%d of %d read; %s): this replay waits for that read and never calls them missing unless a whole read does not find them", gone, dlq, held.Who(), cov.Read, max(cov.Queued, cov.Read), held.Words())
	case !cov.Whole():
		d = fmt.Sprintf("%d previewed message(s) were not found in %s, which another client was reading (%d of %d read); the replay will wait for them and never call them missing unless a whole read does not find them", gone, dlq, cov.Read, max(cov.Queued, cov.Read))
	}
	return []engine.Change{{Kind: engine.ChangeMessagesGone, Queue: dlq, Messages: gone, Detail: d}}
}

// findPreviewed scans dlq for the previewed ids (want: id → copies) and
// counts those found; a first read that finds them all is kept under keep
// (when set) for the run of the replay it names. When some are not found,
// the scan proves nothing until the broker reports no other client holding
// messages of the DLQ: it waits for that (bounded by twice
// Config.Tune.StatsLag) and scans once more, so messages another reader
// held or just gave back are not reported gone. It does not wait for a
// dlqbot replay's read (held names the replays): a replay may hold them
// for as long as it runs.
func (s *Service) findPreviewed(ctx context.Context, dlq string, want map[string]int, keep string) (map[string]int, engine.Coverage, *engine.HeldBy, error) {
	var found map[string]int
	var cov engine.Coverage
	var held *engine.HeldBy
	for try := 0; try < 2; try++ {
		found = make(map[string]int, len(want))
		began := s.d.Clock.Now()
		info, kept, err := s.scanKeeping(ctx, dlq, "an approval's comparison", keep, func(m letter.Message) error {
			id := s.ParseMeta(dlq, m).ID
			if found[id] < want[id] {
				found[id]++
			}
			return nil
		})
		if err != nil {
			return nil, cov, nil, err
		}
		cov = info.Coverage
		gone := 0
		for id, n := range want {
			gone += n - found[id]
		}
		if gone == 0 || try == 1 {
			break
		}
		if kept {
			s.DropKept(keep) // the approval is refused, or reads again
		}
		keep = ""
		if held = s.heldByReplays(ctx, dlq, began, cov); held != nil {
			break
		}
		end := s.d.Clock.Now()
		if _, err := s.AwaitQuiet(ctx, "", dlq, end, end.Add(2*s.cfg.Tune.StatsLag+5*time.Second), true, ctx.Err); err != nil {
			return nil, cov, nil, err
		}
	}
	return found, cov, held, nil
}

// Approve turns a preview token into a queued replay. Unless confirmed is
// set, it first compares the world with the preview and refuses with
// ErrChanged (and the changes) when anything differs. confirmed approves
// despite whatever that compare finds, shown to nobody: a person's
// approval goes through ApproveConfirmed with the digest of what they
// were shown. The token is consumed atomically: of concurrent approvals
// exactly one succeeds, the others get ErrTokenUsed.
func (s *Service) Approve(ctx context.Context, token, approver string, p engine.Params, confirmed bool) (engine.Approval, error) {
	return s.approve(ctx, token, approver, "", p, func(changes []engine.Change) bool { return confirmed || len(changes) == 0 })
}

// ApproveConfirmed is Approve bound to what the approver was shown: digest
// is the ChangesDigest of the changes they confirmed ("" when they
// confirmed none), via the front end the approval came through (recorded
// as the replay's ApprovedVia). The one compare of the world with the preview is made
// here, after the token is consumed; the approval goes ahead only when it
// finds no change or exactly the confirmed ones. Anything else (a change
// that landed after the approver looked) is refused with ErrChanged and
// the changes found now.
func (s *Service) ApproveConfirmed(ctx context.Context, token, approver, via string, p engine.Params, digest string) (engine.Approval, error) {
	return s.approve(ctx, token, approver, via, p, func(changes []engine.Change) bool {
		return len(changes) == 0 || (digest != "" && engine.ChangesDigest(changes) == digest)
	})
}

// approve is Approve and ApproveConfirmed: accept says whether the
// changes the compare found may be approved.
func (s *Service) approve(ctx context.Context, token, approver, via string, p engine.Params, accept func([]engine.Change) bool) (engine.Approval, error) {
	// The replay's id follows from the token (approve.go): a signed
	// record under it means the token started a replay, whatever its used
	// marker says.
	id, err := s.replayIDFor(ctx, token)
	if err != nil {
		return engine.Approval{}, fmt.Errorf("engine: approve %s: %w", token, err)
	}
	// Consume first: of concurrent approvals only one gets this far, so
	// the comparison below (a scan of the DLQ) never races another one.
	if err := s.d.Tokens.Consume(ctx, token, id); err != nil {
		return engine.Approval{}, fmt.Errorf("engine: approve %s: %w", token, err)
	}
	f, changes, lapsed, err := s.compare(ctx, token, p.TakeOver, id)
	if err != nil || !accept(changes) {
		s.DropKept(id)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := s.d.Tokens.Release(rctx, token, id); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			return engine.Approval{}, err
		}
		return engine.Approval{Changes: changes}, fmt.Errorf("engine: approve %s: %w", token, engine.ErrChanged)
	}
	now := s.d.Clock.Now()
	r := engine.Replay{
		ID: id, Token: token, DLQ: f.DLQ, Vhost: f.Vhost, Requester: f.Requester, Approver: approver, ApprovedVia: via,
		State: engine.StateQueued, Params: p.WithDefaults(), Total: f.Total, CreatedAt: now, UpdatedAt: now,
	}
	// Owned before the record exists: ownership by a replay without a
	// record lapses, so a failure below gives nothing away for good.
	if err := s.own(ctx, f, &r, lapsed); err != nil {
		err = fmt.Errorf("engine: approve %s: own the previewed messages: %w", token, err)
		return engine.Approval{Changes: changes}, s.undoApproval(ctx, token, id, false, err)
	}
	if err := s.d.Replays.Create(ctx, r); err != nil {
		err = fmt.Errorf("engine: approve %s: create replay: %w", token, err)
		return engine.Approval{Changes: changes}, s.undoApproval(ctx, token, id, false, err)
	}
	// The replay reads its frozen preview until it ends, however long it
	// stays paused: keep it as long as replay records are kept.
	if err := s.d.Tokens.Retain(ctx, token, 30*24*time.Hour); err != nil {
		err = fmt.Errorf("engine: approve %s: keep the preview: %w", token, err)
		return engine.Approval{Changes: changes}, s.undoApproval(ctx, token, id, true, err)
	}
	s.prover.Close(ctx, f.Proof) // its approval is made: the watch has done its work
	s.LeftTo(ctx, r)             // the replays it took over from say so
	return engine.Approval{Replay: r, Changes: changes}, nil
}

// undoApproval rolls back an approval that failed after the token was
// consumed: the read it kept is given back, the replay it created (if
// created) is withdrawn — cancelled before anything ran, so no stray job
// can start it — and the token is released so the approver can approve
// again. The error says whether the rollback worked.
func (s *Service) undoApproval(ctx context.Context, token, id string, created bool, cause error) error {
	s.DropKept(id)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if created {
		err := s.d.Replays.UpdateUnowned(rctx, id, func(cur *engine.Replay) error {
			if cur.State != engine.StateQueued {
				return engine.ErrNoChange
			}
			cur.State, cur.EndedAt, cur.Withdrawn = engine.StateCancelled, s.d.Clock.Now(), true
			cur.Note = "withdrawn: the approval could not be completed (" + cause.Error() + "); nothing was sent"
			return nil
		})
		if err != nil {
			return fmt.Errorf("%w: %w (replay %s could not be withdrawn: %v; the preview stays used)", engine.ErrApprovalFailed, cause, id, err)
		}
	}
	if err := s.d.Tokens.Release(rctx, token, id); err != nil {
		return fmt.Errorf("%w: %w (the preview could not be released: %v)", engine.ErrApprovalFailed, cause, err)
	}
	return fmt.Errorf("%w: %w; approve the preview again", engine.ErrApprovalFailed, cause)
}

// approvalAttempts bounds how many replay ids one preview token has: an
// approval withdrawn before anything ran (undoApproval) frees the token for
// the next id, at most this many times.
const approvalAttempts = 16

// replayIDFor returns the id an approval of token creates its replay
// under: the first of the token's ids with no record. A record under one
// of them (signed, so not forged) that was not withdrawn means the token
// already started a replay: ErrTokenUsed, whatever the token's used marker
// (outside signed data) says. A record that cannot be read or verified
// refuses the approval too.
func (s *Service) replayIDFor(ctx context.Context, token string) (string, error) {
	for n := 0; n < approvalAttempts; n++ {
		id := engine.TokenReplayID(token, n)
		r, err := s.d.Replays.Get(ctx, id)
		switch {
		case errors.Is(err, engine.ErrReplayNotFound):
			return id, nil
		case err != nil:
			return "", fmt.Errorf("read replay %s: %w", id, err)
		case r.Token == token && r.Withdrawn:
			continue
		default:
			return "", fmt.Errorf("replay %s: %w", id, engine.ErrTokenUsed)
		}
	}
	return "", fmt.Errorf("%d approvals withdrawn: %w", approvalAttempts, engine.ErrTokenUsed)
}

// Enqueue hands replay id to the workers through Deps.Jobs, as the front
// ends do after Approve, trying three times half a second, then a second
// apart, so that a passing Redis error does not leave an approved replay
// that nobody runs. It returns the job queue's last error as it is (the
// store's errors name the operation), or an error at once when the engine
// has no Deps.Jobs. The read the approval kept for a run here is given
// back first: the worker that takes the replay may be in another process.
func (s *Service) Enqueue(ctx context.Context, id string) error {
	s.DropKept(id)
	if s.d.Jobs == nil {
		return fmt.Errorf("engine: enqueue %s: no job queue: the engine was built without Deps.Jobs", id)
	}
	var err error
	for i := range 3 {
		if err = s.d.Jobs.Enqueue(ctx, id); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-s.d.Clock.After(time.Duration(i+1) * 500 * time.Millisecond):
		}
	}
	return err
}
