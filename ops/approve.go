package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
)

// Approval asks to turn a preview token into a replay.
type Approval struct {
	Token  string
	Params engine.Params
	// ConfirmDigest is the Digest of an earlier Changed refusal the caller
	// was shown: approve despite exactly those changes (the HTTP API's
	// confirm_changes, MCP, Slack's "Approve anyway"). The engine's one
	// compare decides: a change since then is refused with the new
	// changes.
	ConfirmDigest string
	// Show, when set, is called with the new replay before it is handed
	// to the workers, so the front end can post where its progress will
	// be edited.
	Show func(ctx context.Context, r engine.Replay)
}

// Approved is an approval's outcome.
type Approved struct {
	Replay engine.Replay
	Frozen engine.Frozen
	// HandOffErr is set when the replay was approved but could not be
	// handed to the workers: nothing was sent, and it should be
	// cancelled.
	HandOffErr error
}

// ChangesDigest names a list of changes (engine.ChangesDigest): an
// approval confirms the changes it was shown by quoting their digest.
func ChangesDigest(changes []engine.Change) string { return engine.ChangesDigest(changes) }

// Approve approves a.Token for c: `replay` on the DLQ and `publish` on
// every target, c named by the policy, not needing a human, and the
// four-eyes rule (comparing principals, with the threshold counted per
// requester and DLQ over the window). The engine then consumes the token
// atomically and makes the one compare of the world with the preview,
// bound to a.ConfirmDigest (a Changed refusal lists what changed;
// nothing is sent). approval.when_unchanged applies to a preview whose
// target's consumers were not restarted since its messages failed. The new
// replay is shown
// (a.Show) and, unless Config.NoHandOff, handed to the workers.
func (o *Ops) Approve(ctx context.Context, c Caller, a Approval) (out Approved, err error) {
	e := audit.Entry{Op: audit.OpApprove, TokenRef: audit.TokenRef(a.Token)}
	defer func() {
		e.ReplayID = out.Replay.ID
		if err == nil && out.HandOffErr != nil {
			e.Detail = joinDetail(e.Detail, "approved but not handed to a worker")
		}
		o.record(ctx, c, e, err)
	}()
	if err := o.admit(ctx, c); err != nil {
		return out, err
	}
	if strings.TrimSpace(a.Token) == "" {
		return out, refuse(BadParams, "A replay needs the token of a preview; preview first.")
	}
	f, err := o.d.Tokens.LoadHeader(ctx, a.Token)
	if err != nil {
		return out, Classify(err, a.Token)
	}
	out.Frozen = f
	e.DLQ, e.Vhost, e.Messages = f.DLQ, f.Vhost, f.Total
	// What no one could get past decides first: a spent token, then a
	// DLQ that is gone, before grants and the four-eyes rule (which
	// someone else could satisfy).
	if err := o.spent(ctx, a.Token); err != nil {
		return out, err
	}
	if err := o.gone(ctx, f.DLQ); err != nil {
		return out, err
	}
	if err := o.mayChange(c); err != nil {
		return out, err
	}
	if err := o.permit(ctx, c, func(id string, g []string) error {
		return o.policy.CheckApprove(id, g, f.DLQ, f.TargetQueues())
	}); err != nil {
		return out, err
	}
	if err := o.human(c, "approve this replay"); err != nil {
		return out, err
	}
	if err := o.whenUnchanged(c, f); err != nil {
		return out, err
	}
	release, err := o.fourEyes(ctx, c, f)
	if err != nil {
		return out, err
	}
	approved := false
	defer func() {
		if !approved {
			release()
		}
	}()
	if err := o.begin(ctx, c, e); err != nil {
		return out, err
	}
	ap, err := o.d.Engine.ApproveConfirmed(ctx, a.Token, o.acting(c), c.frontEnd(), a.Params, a.ConfirmDigest)
	if errors.Is(err, engine.ErrChanged) {
		return out, changedRefusal(ap.Changes, a.ConfirmDigest != "")
	}
	if err != nil {
		return out, Classify(err, f.DLQ)
	}
	approved = true
	out.Replay = ap.Replay
	e.Detail = engine.TakeOverWords(ap.Replay) // the trail names every take-over
	if a.Show != nil {
		a.Show(ctx, out.Replay)
	}
	if o.cfg.NoHandOff {
		return out, nil
	}
	if err := o.d.Engine.Enqueue(ctx, out.Replay.ID); err != nil {
		o.log.Error().Err(err).Str("replay_id", out.Replay.ID).Msg("replay approved but not handed to a worker")
		out.HandOffErr = err
		return out, nil
	}
	if cur, err := o.d.Engine.Status(ctx, out.Replay.ID); err == nil {
		out.Replay = cur
	}
	return out, nil
}

// tokenUsage tells which replay consumed a token ("" when none did); the
// store's Tokens implements it. Token stores without it leave the check
// to the engine's atomic consume.
type tokenUsage interface {
	UsedBy(ctx context.Context, token string) (string, error)
}

// spent refuses a token that already started a replay (TokenUsed) or is
// gone (TokenExpired).
func (o *Ops) spent(ctx context.Context, token string) error {
	tu, ok := o.d.Tokens.(tokenUsage)
	if !ok {
		return nil
	}
	id, err := tu.UsedBy(ctx, token)
	if err != nil {
		return Classify(err, token)
	}
	if id != "" {
		return Classify(fmt.Errorf("ops: approve: replay %s: %w", id, engine.ErrTokenUsed), token)
	}
	return nil
}

// queueInspector tells whether a queue exists; the amqp adapter (Deps.Queues)
// implements it.
type queueInspector interface {
	Inspect(ctx context.Context, queue string) (engine.QueueInfo, error)
}

// gone refuses a DLQ the broker no longer has (QueueNotFound). When the
// broker cannot be asked the engine's approval finds out itself.
func (o *Ops) gone(ctx context.Context, dlq string) error {
	qi, ok := o.d.Queues.(queueInspector)
	if !ok {
		return nil
	}
	info, err := qi.Inspect(ctx, dlq)
	if err != nil || info.Exists {
		return nil
	}
	return Classify(fmt.Errorf("ops: approve: %w", engine.ErrQueueNotFound), dlq)
}

func changedRefusal(changes []engine.Change, again bool) *Refusal {
	msg := "The DLQ or its targets changed since the preview, so nothing was sent."
	if again {
		msg = "What changed since the preview is not what this approval confirmed, so nothing was sent."
	}
	r := refuse(Changed, "%s", msg)
	r.Changes, r.Digest = changes, ChangesDigest(changes)
	return r
}

// ErrAskFailed means Slack did not take the request for a person's
// approval (RequestApproval); nothing was sent.
var ErrAskFailed = errors.New("the preview could not be posted to Slack")

// RequestApproval posts the preview of token to Slack for a person to
// approve, instead of approving it (the MCP tools when their caller needs
// a human). The trail records it as the caller's approval refused with
// NeedsHuman: nothing was approved. c needs `read` on the DLQ (it could preview it); whoever
// clicks Approve needs what approving needs. p may be nil (the preview is
// then rendered from the frozen one).
func (o *Ops) RequestApproval(ctx context.Context, c Caller, token string, p *engine.Preview) (channel, ts string, err error) {
	e := audit.Entry{Op: audit.OpApprove, TokenRef: audit.TokenRef(token)}
	defer func() {
		if err == nil {
			// The caller's approval was not done: a person was asked.
			e.Detail = "asked a person in Slack to approve"
			err = refuse(NeedsHuman, "%s", e.Detail)
			o.record(ctx, c, e, err)
			err = nil
			return
		}
		o.record(ctx, c, e, err)
	}()
	if o.d.Asker == nil {
		return "", "", refuse(Unavailable, "Approval by a person is required, but no Slack front end is configured to ask one. Nothing was sent.")
	}
	f, err := o.d.Tokens.Load(ctx, token)
	if err != nil {
		return "", "", Classify(err, token)
	}
	e.DLQ, e.Vhost, e.Messages = f.DLQ, f.Vhost, f.Total
	// No one could approve a spent token: no one is asked to.
	if err := o.spent(ctx, token); err != nil {
		return "", "", err
	}
	if err := o.permit(ctx, c, func(id string, g []string) error {
		return o.policy.CheckRead(id, g, f.DLQ, "to ask for this replay")
	}); err != nil {
		return "", "", err
	}
	if ch := o.d.Asker.ApprovalChannel(); ch != "" {
		// The DLQ's channel allowlist, before anything is posted.
		if err := o.policy.CheckChannel(f.DLQ, ch); err != nil {
			return "", "", Classify(err, f.DLQ)
		}
	}
	channel, ts, err = o.d.Asker.RequestApproval(ctx, f, p)
	if err != nil {
		return "", "", fmt.Errorf("ops: ask in slack: %w: %w", ErrAskFailed, err)
	}
	return channel, ts, nil
}

// Discard drops an unused preview token. Its requester (compared as a
// principal) may always discard it (withdrawing its own request); anyone
// else needs `replay` on the DLQ and not to need a human.
func (o *Ops) Discard(ctx context.Context, c Caller, token string) (f engine.Frozen, err error) {
	e := audit.Entry{Op: audit.OpDiscard, TokenRef: audit.TokenRef(token)}
	defer func() { o.record(ctx, c, e, err) }()
	if err := o.admit(ctx, c); err != nil {
		return f, err
	}
	f, err = o.d.Tokens.LoadHeader(ctx, token)
	if err != nil {
		return f, Classify(err, token)
	}
	e.DLQ, e.Vhost, e.Messages = f.DLQ, f.Vhost, f.Total
	if o.policy.Person(f.Requester) != o.acting(c) {
		if err := o.permit(ctx, c, func(id string, g []string) error {
			return o.policy.Require(id, g, "to discard someone else's preview",
				needReplay(f.DLQ))
		}); err != nil {
			return f, err
		}
		if err := o.human(c, "discard someone else's preview"); err != nil {
			return f, err
		}
	}
	if err := o.begin(ctx, c, e); err != nil {
		return f, err
	}
	if err := o.d.Tokens.Discard(ctx, token); err != nil {
		if errors.Is(err, engine.ErrTokenUsed) {
			r := refuse(TokenUsed, "That preview was already approved, so it cannot be discarded; pause or cancel its replay instead.")
			r.err = err
			return f, r
		}
		return f, Classify(err, f.DLQ)
	}
	return f, nil
}

// joinDetail joins two audit details with "; ".
func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
