package amqp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestMgmtClientDecoding checks URL escaping, authentication and the
// tolerant decoding against a stand-in for the management API.
func TestMgmtClientDecoding(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.EscapedPath())
		if u, p, ok := r.BasicAuth(); !ok || u != "bob" || p != "s3cret" {
			http.Error(w, "unauthorised", http.StatusUnauthorized)
			return
		}
		switch r.URL.EscapedPath() {
		case "/prefix/api/queues/my%2Fvhost/a%20b":
			// An idle queue: no message_stats; an empty policy as [] (older brokers).
			_, _ = w.Write([]byte(`{"name":"a b","type":"","arguments":{"x-queue-type":"quorum","x-delivery-limit":9},
				"effective_policy_definition":[],"messages_ready":4,"consumers":2,"extra":{"ignored":true}}`))
		case "/prefix/api/queues/my%2Fvhost/p":
			_, _ = w.Write([]byte(`{"name":"p","type":"quorum","arguments":{"x-delivery-limit":9},
				"effective_policy_definition":{"delivery-limit":3},"messages_ready":1,"messages_unacknowledged":2,
				"message_stats":{"publish":10,"deliver_get":8,"ack":6,"redeliver":1},
				"messages_details":{"samples":[{"sample":1,"timestamp":1700000010000},{"sample":1,"timestamp":1700000005000}]}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	b, err := New(Config{URL: "amqp://u:p@127.0.0.1:5672/my%2Fvhost", ManagementURL: "http://bob:s3cret@" + srv.Listener.Addr().String() + "/prefix/"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := b.QueueStats(ctx, "a b")
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != "quorum" || s.DeliveryLimit != 9 || !s.Sampled || s.HasStats || s.Ready != 4 || s.Consumers != 2 || s.Publish != 0 {
		t.Fatalf("idle queue stats = %+v", s)
	}
	s, err = b.QueueStats(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	want := QueueStats{Name: "p", Type: "quorum", DeliveryLimit: 3, Sampled: true, Ready: 1, Unacked: 2,
		HasStats: true, Publish: 10, DeliverGet: 8, Ack: 6, Redeliver: 1, SampledAt: time.UnixMilli(1700000010000), Fetched: s.Fetched}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("stats = %+v\nwant    %+v", s, want)
	}
	if paths[0] != "/prefix/api/queues/my%2Fvhost/a%20b" {
		t.Fatalf("requested %q", paths[0])
	}
}

func TestHeaderConversion(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	in := amqp.Table{
		"s": "x", "n": int64(3), "t": ts, "raw": []byte{1},
		"tbl": amqp.Table{"inner": amqp.Table{"k": int32(1)}},
		"arr": []any{"a", amqp.Table{"k": []any{amqp.Table{"deep": true}}}},
	}
	got := fromTable(in)
	want := map[string]any{
		"s": "x", "n": int64(3), "t": ts, "raw": []byte{1},
		"tbl": map[string]any{"inner": map[string]any{"k": int32(1)}},
		"arr": []any{"a", map[string]any{"k": []any{map[string]any{"deep": true}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fromTable = %#v", got)
	}
	if _, ok := in["tbl"].(amqp.Table); !ok {
		t.Fatal("fromTable changed its input")
	}
	back := toTable(got)
	if !reflect.DeepEqual(back, in) {
		t.Fatalf("toTable(fromTable(x)) = %#v, want %#v", back, in)
	}
	if err := back.Validate(); err != nil {
		t.Fatalf("converted table does not validate: %v", err)
	}
	if fromTable(nil) != nil || toTable(nil) != nil {
		t.Fatal("nil tables must stay nil")
	}
}
