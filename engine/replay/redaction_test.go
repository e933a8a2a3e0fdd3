package replay_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/engine/replay"
	"github.com/stroma/dlqbot/internal/testkit"
)

const redactingPolicy = `
roles:
  - name: r
    users: [U012ABCDEF]
    grants:
      - queues: ["*"]
        actions: [read]
redaction:
  headers: [x-card-holder]
  json_paths: [$.card.number, $.customer.email]
`

// TestPreviewRedacts: with the policy's redaction rules, no view a
// preview gives of its messages (samples, exception text, failure groups,
// the whole JSON) holds a hidden header's value or a hidden JSON value,
// while the preview still selects and freezes every message and the DLQ
// keeps them all; with excerpts off, no payload byte is shown at all.
func TestPreviewRedacts(t *testing.T) {
	t.Parallel()
	policy, err := commands.ParsePolicy([]byte(redactingPolicy))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvTuned(t, replay.Config{}, testkit.Rabbit3, func(d *replay.Deps) { d.Redactor = policy })
	r := e.rabbit
	src, dlq := testkit.Name("src"), testkit.Name("dlq")
	r.Topology(src, dlq, nil)
	const card, email, holder = "4111111111111111", "jane.doe@example.com", "Jane Q Holder"
	var msgs []amqp.Publishing
	for i := range 4 {
		body := `{"card":{"number":"` + card + `","exp":"12/30"},"customer":{"email":"` + email + `"},"n":` + string(rune('0'+i)) + `}`
		msgs = append(msgs, testkit.Msg("m"+string(rune('0'+i)), []byte(body), amqp.Table{
			"x-original-exchange": "", "x-original-routingKey": src, "x-card-holder": holder,
			"x-exception-message": "card " + card + " of " + holder + " declined (" + email + ")",
		}))
	}
	msgs = append(msgs, testkit.Msg("plain", []byte("card="+card), amqp.Table{"x-original-exchange": "", "x-original-routingKey": src}))
	r.Publish(dlq, msgs...)
	r.WaitCount(dlq, 5, 20*time.Second)
	ctx := context.Background()

	p, err := e.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U012ABCDEF")
	if err != nil {
		t.Fatal(err)
	}
	if p.Selected != 5 || p.Token == "" {
		t.Fatalf("selected %d (token %q), want all 5 frozen", p.Selected, p.Token)
	}
	raw, _ := json.Marshal(p)
	// "411111": the card's first six digits, the shortest piece a partial
	// mask would show ("4111" alone also turns up in the random hex of
	// the test's queue names and message ids, once in a few hundred runs).
	for _, secret := range []string{card, email, holder, "411111"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the preview shows %q: %s", secret, raw)
		}
	}
	var excerpts, exceptions int
	for _, m := range p.Messages {
		if m.Excerpt != "" {
			excerpts++
			if !strings.Contains(m.Excerpt, engine.Hidden) || !strings.Contains(m.Excerpt, `"exp":"12/30"`) {
				t.Errorf("excerpt %q: want the card and e-mail hidden, the rest kept", m.Excerpt)
			}
		}
		if strings.Contains(m.Exception, "declined") {
			exceptions++
		}
	}
	if excerpts != 4 || exceptions != 4 {
		t.Errorf("%d redacted excerpts and %d exceptions shown, want 4 and 4", excerpts, exceptions)
	}
	if r.Count(dlq) != 5 {
		t.Fatalf("the preview changed the DLQ: %d left", r.Count(dlq))
	}
	f, err := e.store.Tokens().Load(ctx, p.Token)
	if err != nil || f.Total != 5 {
		t.Fatalf("frozen: %+v %v", f, err)
	}

	// No excerpt at all.
	off := newEnvTuned(t, replay.Config{ExcerptBytes: -1}, testkit.Rabbit3, func(d *replay.Deps) { d.Redactor = policy })
	p, err = off.svc.Preview(ctx, engine.Selection{DLQ: dlq}, "U012ABCDEF")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Messages {
		if m.Excerpt != "" {
			t.Errorf("excerpt %q shown with excerpts off", m.Excerpt)
		}
	}
	r.WaitCount(dlq, 5, 20*time.Second)
}
