package amqp

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ch := e.channel()
	defer ch.Close()
	q1, q2, q3 := e.queue("t-route", nil), e.queue("t-route", nil), e.queue("t-route", nil)
	exchange := func(kind string) string {
		name := "t-route-" + kind + "-" + randomID()[:10]
		if err := ch.ExchangeDeclare(name, kind, false, true, false, false, nil); err != nil {
			t.Fatalf("declare %s exchange: %v", kind, err)
		}
		t.Cleanup(func() {
			if c, err := e.conn.Channel(); err == nil {
				_ = c.ExchangeDelete(name, false, false)
				c.Close()
			}
		})
		return name
	}
	bindQ := func(q, key, x string) {
		if err := ch.QueueBind(q, key, x, false, nil); err != nil {
			t.Fatalf("bind %s to %s with %q: %v", q, x, key, err)
		}
	}
	direct, topic, fanout, inner, headers := exchange("direct"), exchange("topic"), exchange("fanout"), exchange("fanout"), exchange("headers")
	bindQ(q1, "k1", direct)
	bindQ(q2, "k2", direct)
	bindQ(q3, "k1", direct)
	bindQ(q1, "orders.*.created", topic)
	bindQ(q2, "orders.#", topic)
	bindQ(q3, "#.eu", topic)
	bindQ(q1, "", fanout)
	bindQ(q2, "ignored", fanout)
	// Exchange to exchange: topic --audit.#--> inner (fanout) --> q3.
	if err := ch.ExchangeBind(inner, "audit.#", topic, false, nil); err != nil {
		t.Fatal(err)
	}
	bindQ(q3, "", inner)
	bindQ(q1, "", headers)

	b := testBroker(t, Config{})
	ctx := context.Background()
	sorted := func(qs ...string) []string {
		out := slices.Clone(qs)
		slices.Sort(out)
		return out
	}
	cases := []struct {
		name, exchange, key string
		want                []string
	}{
		{"direct", direct, "k1", sorted(q1, q3)},
		{"direct-other", direct, "k2", []string{q2}},
		{"direct-no-match", direct, "k3", nil},
		{"topic-star", topic, "orders.eu.created", sorted(q1, q2)},
		{"topic-suffix", topic, "orders.x.eu", sorted(q2, q3)},
		{"topic-hash", topic, "orders.paid", []string{q2}},
		{"topic-hash-zero-words", topic, "orders", []string{q2}},
		{"topic-no-match", topic, "payments.us", nil},
		{"topic-exchange-to-exchange", topic, "audit.login", []string{q3}},
		{"fanout", fanout, "anything", sorted(q1, q2)},
		{"default", "", q2, []string{q2}},
		{"default-missing", "", q2 + "-missing", nil},
	}
	for _, tc := range cases {
		got, err := b.Route(ctx, tc.exchange, tc.key)
		if err != nil {
			t.Errorf("%s: Route(%q, %q): %v", tc.name, tc.exchange, tc.key, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Route(%q, %q) = %v, want %v", tc.name, tc.exchange, tc.key, got, tc.want)
		}
	}
	if _, err := b.Route(ctx, headers, "k1"); err == nil || !strings.Contains(err.Error(), "headers exchange") {
		t.Errorf("Route through a headers exchange: %v, want an error saying it cannot be resolved", err)
	}
	if _, err := b.Route(ctx, direct+"-missing", "k1"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("Route through a missing exchange: %v", err)
	}
}

func TestTopicMatch(t *testing.T) {
	cases := []struct {
		pattern, key string
		want         bool
	}{
		{"a.b.c", "a.b.c", true},
		{"a.b.c", "a.b", false},
		{"a.*.c", "a.x.c", true},
		{"a.*.c", "a.c", false},
		{"a.#", "a", true},
		{"a.#", "a.b.c.d", true},
		{"#.c", "c", true},
		{"#.c", "a.b.c", true},
		{"#.c", "a.b.d", false},
		{"#", "", true},
		{"#", "a.b", true},
		{"*", "", false},
		{"*", "a", true},
		{"a.#.b.#.c", "a.x.b.y.z.c", true},
		{"a.#.b.#.c", "a.b.c", true},
		{"a.#.b.#.c", "a.c.b", false},
		{"#.#", "a", true},
		{"*.#", "", false},
		{"", "", true},
		{"", "a", false},
	}
	for _, tc := range cases {
		if got := topicMatch(words(tc.pattern), words(tc.key)); got != tc.want {
			t.Errorf("topicMatch(%q, %q) = %v, want %v", tc.pattern, tc.key, got, tc.want)
		}
	}
}
