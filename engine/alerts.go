package engine

import (
	"context"
	"time"
)

// AlertRecord is a DLQ watch alert as every replica shares it: which DLQ,
// where it was posted, the depth it counts arrivals from, and the
// arrivals its message last showed. The watch itself is package ops's;
// the record lives here so that the store can keep it without knowing
// the layers above.
type AlertRecord struct {
	ID       string    `json:"id"`
	DLQ      string    `json:"dlq"`
	Channel  string    `json:"channel"`
	TS       string    `json:"ts,omitempty"` // the Slack message, once posted
	Opened   time.Time `json:"opened"`
	Baseline int       `json:"baseline"`
	Arrived  int       `json:"arrived"`
	Edited   time.Time `json:"edited"`
}

// AlertStore coordinates alerts between replicas: each state transition
// is one atomic step in Redis that exactly one replica wins; the store's
// Alerts implements it.
type AlertStore interface {
	// Open records r as its DLQ's alert unless it already has one or is
	// snoozed; opened says whether this call did.
	Open(ctx context.Context, r AlertRecord) (opened bool, err error)
	// Posted records the message alert id was posted as; ok is false
	// when the alert was closed meanwhile (its DLQ drained before the
	// message was out).
	Posted(ctx context.Context, dlq, id, ts string) (ok bool, err error)
	// Get returns dlq's alert, if any.
	Get(ctx context.Context, dlq string) (AlertRecord, bool, error)
	// Grow sets alert id's arrivals to arrived when that is more than it
	// holds and its last edit is at least gap before now; grown says
	// whether this call did (its caller then edits the message).
	Grow(ctx context.Context, dlq, id string, arrived int, now time.Time, gap time.Duration) (AlertRecord, bool, error)
	// Close removes alert id; closed says whether this call did.
	Close(ctx context.Context, dlq, id string) (AlertRecord, bool, error)
	// Snooze keeps dlq from opening an alert for d.
	Snooze(ctx context.Context, dlq string, d time.Duration) error
	// List returns the open alerts.
	List(ctx context.Context) ([]AlertRecord, error)
}
