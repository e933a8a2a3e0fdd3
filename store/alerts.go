package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.AlertStore = (*Alerts)(nil)

// alertTTL bounds how long an alert nobody resolved stays open.
const alertTTL = 7 * 24 * time.Hour

// Alerts coordinates the DLQ watch's alerts between replicas
// (engine.AlertStore): a DLQ's alert is one JSON record, opened with SET NX
// (unless the DLQ is snoozed) and changed only by compare-and-set on its
// whole value, so of replicas making the same transition at once exactly
// one wins and posts or edits the message. A record names the Slack
// message the bot edits, so a store with a key signs it (alert_sign.go).
type Alerts struct{ b *base }

// Alerts returns the watch's alert records.
func (s *Store) Alerts() *Alerts { return &Alerts{s.b} }

// openAlertScript opens a DLQ's alert unless it has one or is snoozed.
//
//	KEYS[1] the alert, KEYS[2] the DLQ's snooze; ARGV[1] the record
//	(stored form), ARGV[2] its time to live in ms, ARGV[3] a record that
//	failed its check, to be replaced ("": none)
//
// It returns 1 when it opened the alert, 0 otherwise.
var openAlertScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local cur = redis.call('GET', KEYS[1])
if cur and (ARGV[3] == '' or cur ~= ARGV[3]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// casAlertScript replaces (or, with ARGV[2] empty, deletes) an alert
// record only if it still holds ARGV[1]; it returns 1 when it did.
var casAlertScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL') end
return 1
`)

// Open records r as its DLQ's alert unless the DLQ has one or is snoozed.
func (a *Alerts) Open(ctx context.Context, r engine.AlertRecord) (bool, error) {
	if err := checkTag("dlq", r.DLQ); err != nil {
		return false, fmt.Errorf("store: open alert: %w", err)
	}
	js, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("store: open alert of %s: %w", r.DLQ, err)
	}
	keys := []string{a.b.k.alert(r.DLQ), a.b.k.alertSnooze(r.DLQ)}
	stored := a.b.signAlert(r.DLQ, js)
	n, err := openAlertScript.Run(ctx, a.b.rdb, keys, stored, alertTTL.Milliseconds(), "").Int()
	if err == nil && n == 0 {
		// A record that fails its check is no alert: this one replaces it.
		if _, raw, _, gerr := a.get(ctx, r.DLQ); errors.Is(gerr, engine.ErrBadSignature) && raw != "" {
			n, err = openAlertScript.Run(ctx, a.b.rdb, keys, stored, alertTTL.Milliseconds(), raw).Int()
		}
	}
	if err != nil {
		return false, fail(err, "open alert of %s", r.DLQ)
	}
	if n == 1 {
		// The index is a hint for List; records are the truth.
		if err := a.b.rdb.SAdd(ctx, a.b.k.alerts(), r.DLQ).Err(); err != nil {
			return true, fail(err, "index alert of %s", r.DLQ)
		}
	}
	return n == 1, nil
}

// get returns dlq's record and its raw value; a record that fails its
// check is a SignatureError, with its raw value.
func (a *Alerts) get(ctx context.Context, dlq string) (engine.AlertRecord, string, bool, error) {
	var r engine.AlertRecord
	raw, err := a.b.rdb.Get(ctx, a.b.k.alert(dlq)).Result()
	if errors.Is(err, redis.Nil) {
		return r, "", false, nil
	}
	if err != nil {
		return r, "", false, fail(err, "get alert of %s", dlq)
	}
	js, err := a.b.openAlert(dlq, raw)
	if err != nil {
		return r, raw, false, err
	}
	if err := json.Unmarshal(js, &r); err != nil {
		return r, "", false, fmt.Errorf("store: alert of %s: %w", dlq, err)
	}
	return r, raw, true, nil
}

// Get returns dlq's alert, if it has one. A record that fails its check
// is reported and read as none, so the watch opens a fresh alert over it.
func (a *Alerts) Get(ctx context.Context, dlq string) (engine.AlertRecord, bool, error) {
	if checkTag("dlq", dlq) != nil {
		return engine.AlertRecord{}, false, nil
	}
	r, _, ok, err := a.get(ctx, dlq)
	if errors.Is(err, engine.ErrBadSignature) {
		return engine.AlertRecord{}, false, nil
	}
	return r, ok, err
}

// change applies fn to alert id of dlq and writes the result if the
// record did not change meanwhile (nil from fn deletes it); it reports
// whether it did, and the record as written (or deleted).
func (a *Alerts) change(ctx context.Context, dlq, id string, fn func(*engine.AlertRecord) (keep, ok bool)) (engine.AlertRecord, bool, error) {
	r, raw, found, err := a.get(ctx, dlq)
	if err != nil || !found || r.ID != id {
		return r, false, err
	}
	keep, ok := fn(&r)
	if !ok {
		return r, false, nil
	}
	next := ""
	if keep {
		js, err := json.Marshal(r)
		if err != nil {
			return r, false, fmt.Errorf("store: alert of %s: %w", dlq, err)
		}
		next = a.b.signAlert(dlq, js)
	}
	n, err := casAlertScript.Run(ctx, a.b.rdb, []string{a.b.k.alert(dlq)}, raw, next).Int()
	if err != nil {
		return r, false, fail(err, "change alert of %s", dlq)
	}
	return r, n == 1, nil
}

// Posted records the Slack message alert id was posted as.
func (a *Alerts) Posted(ctx context.Context, dlq, id, ts string) (bool, error) {
	_, ok, err := a.change(ctx, dlq, id, func(r *engine.AlertRecord) (bool, bool) { r.TS = ts; return true, true })
	return ok, err
}

// Grow raises alert id's arrivals to arrived when that is more than it
// shows and its last edit was gap or more before now.
func (a *Alerts) Grow(ctx context.Context, dlq, id string, arrived int, now time.Time, gap time.Duration) (engine.AlertRecord, bool, error) {
	return a.change(ctx, dlq, id, func(r *engine.AlertRecord) (bool, bool) {
		if arrived <= r.Arrived || now.Sub(r.Edited) < gap {
			return true, false
		}
		r.Arrived, r.Edited = arrived, now.UTC()
		return true, true
	})
}

// Close removes alert id of dlq.
func (a *Alerts) Close(ctx context.Context, dlq, id string) (engine.AlertRecord, bool, error) {
	r, ok, err := a.change(ctx, dlq, id, func(*engine.AlertRecord) (bool, bool) { return false, true })
	if ok {
		if err := a.b.rdb.SRem(ctx, a.b.k.alerts(), dlq).Err(); err != nil {
			return r, true, fail(err, "unindex alert of %s", dlq)
		}
	}
	return r, ok, err
}

// Snooze keeps dlq from opening an alert for d.
func (a *Alerts) Snooze(ctx context.Context, dlq string, d time.Duration) error {
	if err := checkTag("dlq", dlq); err != nil {
		return fmt.Errorf("store: snooze: %w", err)
	}
	if err := a.b.rdb.Set(ctx, a.b.k.alertSnooze(dlq), "1", d).Err(); err != nil {
		return fail(err, "snooze %s", dlq)
	}
	return nil
}

// List returns the open alerts, ordered by DLQ name.
func (a *Alerts) List(ctx context.Context) ([]engine.AlertRecord, error) {
	dlqs, err := a.b.rdb.SMembers(ctx, a.b.k.alerts()).Result()
	if err != nil {
		return nil, fail(err, "list alerts")
	}
	var out []engine.AlertRecord
	for _, d := range dlqs {
		r, ok, err := a.Get(ctx, d) // one that fails its check is left out
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(x, y engine.AlertRecord) int { return strings.Compare(x.DLQ, y.DLQ) })
	return out, nil
}

// SaveGroups keeps a for dlq's alerts (ops.GroupsSeen): the failure
// groups the DLQ's latest whole preview saw, for alertTTL. The caller
// leaves the groups' texts out; the store keeps what it is given.
func (a *Alerts) SaveGroups(ctx context.Context, dlq string, seen engine.Arrivals) error {
	if err := checkTag("dlq", dlq); err != nil {
		return fmt.Errorf("store: save failure groups: %w", err)
	}
	js, err := json.Marshal(seen)
	if err != nil {
		return fmt.Errorf("store: save failure groups of %s: %w", dlq, err)
	}
	if err := a.b.rdb.Set(ctx, a.b.k.alertGroups(dlq), js, alertTTL).Err(); err != nil {
		return fail(err, "save failure groups of %s", dlq)
	}
	return nil
}

// Groups returns what SaveGroups kept for dlq; ok is false when nothing is.
func (a *Alerts) Groups(ctx context.Context, dlq string) (engine.Arrivals, bool, error) {
	var seen engine.Arrivals
	if checkTag("dlq", dlq) != nil {
		return seen, false, nil
	}
	raw, err := a.b.rdb.Get(ctx, a.b.k.alertGroups(dlq)).Bytes()
	if errors.Is(err, redis.Nil) {
		return seen, false, nil
	}
	if err != nil {
		return seen, false, fail(err, "get failure groups of %s", dlq)
	}
	if err := json.Unmarshal(raw, &seen); err != nil {
		return seen, false, fmt.Errorf("store: failure groups of %s: %w", dlq, err)
	}
	return seen, true, nil
}
