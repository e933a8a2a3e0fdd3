package amqp

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
)

func TestZZStall(t *testing.T) {
	if os.Getenv("ZZS") == "" {
		t.Skip()
	}
	n, _ := strconv.Atoi(os.Getenv("ZZS"))
	e := newEnv(t)
	q := e.queue("t-zzs", amqp.Table{"x-queue-type": "quorum"})
	body := make([]byte, 1024)
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = amqp.Publishing{Body: body, DeliveryMode: 2}
	}
	e.publish(q, msgs)
	e.waitReady(q, n)
	b := testBroker(t, Config{SettleTimeout: time.Millisecond})
	ctx := context.Background()
	land := func() time.Duration {
		t0 := time.Now()
		for e.ready(q) != n {
			if time.Since(t0) > 240*time.Second {
				t.Fatalf("stuck")
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(t0)
	}
	for round := 0; round < 4; round++ {
		t0 := time.Now()
		if _, err := b.Scan(ctx, q, func(engine.Message) error { return nil }); err != nil {
			t.Fatal(err)
		}
		d := time.Since(t0)
		t.Logf("ours: scan %v landed after %v", d, land())
		t0 = time.Now()
		if _, err := referenceScan(e.conn, q, n); err != nil {
			t.Fatal(err)
		}
		d = time.Since(t0)
		t.Logf("ref:  scan %v landed after %v", d, land())
	}
}
