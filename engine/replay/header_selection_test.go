package replay_test

import (
	"context"
	"slices"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestHeaderSelection: header.<name>=<value> selects exactly the messages
// whose header has that value — not those without the header, with
// another value, with the value in another case or under a name in
// another case — and a number matches in decimal. The samples show the
// headers. On every broker of the matrix.
func TestHeaderSelection(t *testing.T) {
	t.Parallel()
	testkit.EachBroker(t, headerSelection)
}

func headerSelection(t *testing.T, on testkit.Broker) {
	t.Parallel()
	e := newEnvOn(t, replay.Config{}, on)
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	route := func(extra amqp.Table) amqp.Table {
		h := amqp.Table{"x-original-exchange": "", "x-original-routingKey": src}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	r.Publish(dlq,
		testkit.Msg("acme1", []byte("1"), route(amqp.Table{"tenant": "acme", "shard": int32(7)})),
		testkit.Msg("acme2", []byte("2"), route(amqp.Table{"tenant": "acme", "shard": int32(8)})),
		testkit.Msg("other", []byte("3"), route(amqp.Table{"tenant": "acme-eu"})),
		testkit.Msg("upper", []byte("4"), route(amqp.Table{"tenant": "ACME"})),
		testkit.Msg("name", []byte("5"), route(amqp.Table{"Tenant": "acme"})),
		testkit.Msg("none", []byte("6"), route(nil)),
	)
	r.WaitCount(dlq, 6, 20*time.Second)
	ctx := context.Background()
	now := time.Now()
	for _, c := range []struct {
		text string
		want []string
	}{
		{dlq + " header.tenant=acme", []string{"acme1", "acme2"}},
		{dlq + " header.Tenant=acme", []string{"name"}},
		{dlq + " header.tenant=acme header.shard=7", []string{"acme1"}},
		{dlq + " header.tenant=nobody", nil},
	} {
		sel, msg := commands.ParseSelection(c.text, now)
		if msg != "" {
			t.Fatalf("%s: %s", c.text, msg)
		}
		p, err := e.svc.Preview(ctx, sel, "U012ABCDEF")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range p.Messages {
			got = append(got, m.MessageID)
			if m.Headers["tenant"] == "" && m.Headers["Tenant"] == "" {
				t.Errorf("%s: sample %s shows no tenant header: %v", c.text, m.MessageID, m.Headers)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) || p.Selected != len(c.want) {
			t.Errorf("%s: selected %d %v, want %v", c.text, p.Selected, got, c.want)
		}
		if again, _ := commands.ParseSelection(p.Selection, now); !equalHeaders(again.Headers, sel.Headers) {
			t.Errorf("%s: the canonical selection %q reads back as %v", c.text, p.Selection, again.Headers)
		}
	}
	if n := r.Count(dlq); n != 6 {
		t.Fatalf("%d messages left in the DLQ, want all 6", n)
	}
}

func equalHeaders(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
