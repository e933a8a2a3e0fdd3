package store

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// TestAlertTransitionsOnce: of ten replicas opening one DLQ's alert at
// once exactly one does; each later transition (grow, close) is won by
// one caller; a snoozed DLQ opens none.
func TestAlertTransitionsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	al := e.st.Alerts()
	t0 := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	var opened atomic.Int32
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := al.Open(e.ctx, engine.AlertRecord{ID: "a_" + string(rune('a'+i)), DLQ: "orders.dlq", Channel: "C0OPS", Opened: t0, Baseline: 2, Arrived: 30, Edited: t0})
			if err != nil {
				t.Error(err)
			}
			if ok {
				opened.Add(1)
			}
		}()
	}
	wg.Wait()
	if opened.Load() != 1 {
		t.Fatalf("%d replicas opened the alert, want 1", opened.Load())
	}
	r, ok, err := al.Get(e.ctx, "orders.dlq")
	if err != nil || !ok || r.Baseline != 2 {
		t.Fatalf("Get = %+v %v %v", r, ok, err)
	}
	if ok, err := al.Posted(e.ctx, "orders.dlq", r.ID, "1700.1"); !ok || err != nil {
		t.Fatalf("Posted = %v %v", ok, err)
	}
	if _, grown, _ := al.Grow(e.ctx, "orders.dlq", r.ID, 60, t0.Add(500*time.Millisecond), time.Second); grown {
		t.Error("grew half a second after the last edit; the gap is a second")
	}
	if _, grown, _ := al.Grow(e.ctx, "orders.dlq", r.ID, 30, t0.Add(time.Minute), time.Second); grown {
		t.Error("grew to the arrivals it already shows")
	}
	var grew atomic.Int32
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g, ok, err := al.Grow(e.ctx, "orders.dlq", r.ID, 60, t0.Add(time.Minute), time.Second); err != nil {
				t.Error(err)
			} else if ok {
				if g.Arrived != 60 || g.TS != "1700.1" {
					t.Errorf("grown record %+v", g)
				}
				grew.Add(1)
			}
		}()
	}
	wg.Wait()
	if grew.Load() != 1 {
		t.Fatalf("%d callers grew the alert, want 1", grew.Load())
	}
	if list, err := al.List(e.ctx); err != nil || len(list) != 1 || list[0].Arrived != 60 {
		t.Fatalf("List = %+v %v", list, err)
	}
	if _, closed, err := al.Close(e.ctx, "orders.dlq", "a_other"); closed || err != nil {
		t.Fatalf("closed another alert's id: %v %v", closed, err)
	}
	if c, closed, err := al.Close(e.ctx, "orders.dlq", r.ID); !closed || err != nil || c.TS != "1700.1" {
		t.Fatalf("Close = %+v %v %v", c, closed, err)
	}
	if _, closed, _ := al.Close(e.ctx, "orders.dlq", r.ID); closed {
		t.Fatal("closed twice")
	}
	if list, _ := al.List(e.ctx); len(list) != 0 {
		t.Fatalf("List after close = %+v", list)
	}
	if err := al.Snooze(e.ctx, "orders.dlq", time.Hour); err != nil {
		t.Fatal(err)
	}
	if ok, err := al.Open(e.ctx, engine.AlertRecord{ID: "a_z", DLQ: "orders.dlq"}); ok || err != nil {
		t.Fatalf("opened an alert of a snoozed DLQ: %v %v", ok, err)
	}
	if ok, _ := al.Open(e.ctx, engine.AlertRecord{ID: "a_y", DLQ: "payments.dlq"}); !ok {
		t.Fatal("the snooze of orders.dlq kept payments.dlq from alerting")
	}
}

// TestAlertTampered: an alert record pointed at another Slack message in
// Redis is refused and reported: Get and List read it as none, Posted
// refuses it, and the next alert opened for the DLQ replaces it.
func TestAlertTampered(t *testing.T) {
	t.Parallel()
	e, refused := signedEnv(t)
	al := e.st.Alerts()
	t0 := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	rec := engine.AlertRecord{ID: "a_1", DLQ: "orders.dlq", Channel: "C0OPS", TS: "1.000", Opened: t0, Arrived: 3, Edited: t0}
	if ok, err := al.Open(e.ctx, rec); err != nil || !ok {
		t.Fatalf("open: %v %v", ok, err)
	}
	key := e.st.b.k.alert("orders.dlq")
	raw := e.rdb.Get(e.ctx, key).Val()
	e.rdb.Set(e.ctx, key, strings.Replace(raw, "C0OPS", "C0ELSEWHERE", 1), time.Hour)
	if r, ok, err := al.Get(e.ctx, "orders.dlq"); ok || err != nil {
		t.Fatalf("a changed alert reads %+v, %v, %v; want none", r, ok, err)
	}
	if ok, err := al.Posted(e.ctx, "orders.dlq", "a_1", "2.000"); ok || !errors.Is(err, engine.ErrBadSignature) {
		t.Fatalf("posting a changed alert: %v %v; want refused", ok, err)
	}
	if list, err := al.List(e.ctx); err != nil || len(list) != 0 {
		t.Fatalf("list: %+v %v; want the changed alert left out", list, err)
	}
	if len(*refused) == 0 || (*refused)[0].Kind != "alert" {
		t.Fatalf("refusals reported: %v", *refused)
	}
	rec.ID = "a_2"
	if ok, err := al.Open(e.ctx, rec); err != nil || !ok {
		t.Fatalf("opening over a changed alert: %v %v", ok, err)
	}
	if r, ok, err := al.Get(e.ctx, "orders.dlq"); err != nil || !ok || r.ID != "a_2" || r.Channel != "C0OPS" {
		t.Fatalf("after reopening: %+v %v %v", r, ok, err)
	}
	if ttl := e.rdb.PTTL(e.ctx, key).Val(); ttl <= time.Hour {
		t.Fatalf("the reopened alert kept the changed record's TTL (%v)", ttl)
	}
}
