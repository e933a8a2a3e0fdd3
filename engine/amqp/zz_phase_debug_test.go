package amqp

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func TestZZPhases(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	n, _ := strconv.Atoi(os.Getenv("ZZ"))
	pf, _ := strconv.Atoi(os.Getenv("ZZPF"))
	e := newEnv(t)
	q := e.queue("t-zz", amqp.Table{"x-queue-type": os.Getenv("ZZT")})
	body := make([]byte, 1024)
	msgs := make([]amqp.Publishing, n)
	for i := range msgs {
		msgs[i] = amqp.Publishing{Body: body, Headers: amqp.Table{"x-death": []any{amqp.Table{"queue": "orders", "count": int64(1)}}}}
	}
	e.publish(q, msgs)
	e.waitReady(q, n)
	b := testBroker(t, Config{Prefetch: pf})
	ctx := context.Background()
	for round := 0; round < 2; round++ {
		t0 := time.Now()
		r, err := b.openReader(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var opens time.Duration
		cnt := 0
		for {
			before := len(r.chans)
			t1 := time.Now()
			h, err := r.next(ctx)
			if len(r.chans) != before {
				opens += time.Since(t1)
			}
			if errors.Is(err, errReadDone) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = toMessage(h)
			cnt++
		}
		t2 := time.Now()
		ret, err := r.release()
		t3 := time.Now()
		_ = ret
		for e.ready(q) != n && time.Since(t3) < 60*time.Second {
			time.Sleep(10 * time.Millisecond)
		}
		t4 := time.Now()
		t.Logf("read %d in %v (window switches incl. first delivery %v, %d chans), release %v, settle %v", cnt, t2.Sub(t0), opens, len(r.chans), t3.Sub(t2), t4.Sub(t3))
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && e.ready(q) != n {
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("ready %d after %v", e.ready(q), time.Since(t4))
		if e.ready(q) != n {
			st, _ := b.QueueStats(ctx, q)
			time.Sleep(12 * time.Second)
			st2, _ := b.QueueStats(ctx, q)
			t.Fatalf("stats %+v\n%+v ready %d", st, st2, e.ready(q))
		}
	}
}
