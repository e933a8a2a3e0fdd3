package amqp

import (
	"context"
	"sync"
	"time"
)

// infoTTL is how long a queue's management answer (type, arguments,
// policies) serves Inspect and the read budget: a step's Inspect and its
// read right after cost one request, not two.
const infoTTL = time.Second

// infoCache holds recent management answers by queue.
type infoCache struct {
	mu sync.Mutex
	m  map[string]cachedInfo
	// classic holds the queues the latest answer for each said are
	// classic, however old that answer: a queue's type changes only when
	// it is deleted and declared again, so a read of one needs no budget
	// while the API is down.
	classic map[string]bool
}

// knownClassic reports whether an earlier answer said queue is classic.
func (c *infoCache) knownClassic(queue string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.classic[queue]
}

type cachedInfo struct {
	q  *queueJSON
	p  *policyJSON
	at time.Time
}

// queueInfo is the management API's answer for queue, at most infoTTL old.
func (b *Broker) queueInfo(ctx context.Context, queue string) (*queueJSON, error) {
	b.info.mu.Lock()
	c, ok := b.info.m[queue]
	b.info.mu.Unlock()
	if ok && time.Since(c.at) < infoTTL {
		return c.q, nil
	}
	q, err := b.mgmt.queue(ctx, queue, false)
	if err != nil {
		return nil, err
	}
	b.info.mu.Lock()
	defer b.info.mu.Unlock()
	if b.info.m == nil || len(b.info.m) > 1000 {
		b.info.m = map[string]cachedInfo{}
	}
	b.info.m[queue] = cachedInfo{q: q, at: time.Now()}
	if q.queueType() == "classic" {
		if b.info.classic == nil || len(b.info.classic) > 10000 {
			b.info.classic = map[string]bool{}
		}
		b.info.classic[queue] = true
	} else {
		delete(b.info.classic, queue)
	}
	return q, nil
}

// policyInfo is the management API's answer for policy name, at most
// infoTTL old.
func (b *Broker) policyInfo(ctx context.Context, name string) (*policyJSON, error) {
	key := "\x00policy:" + name // queue names cannot hold NUL
	b.info.mu.Lock()
	c, ok := b.info.m[key]
	b.info.mu.Unlock()
	if ok && time.Since(c.at) < infoTTL {
		return c.p, nil
	}
	p, err := b.mgmt.policy(ctx, name)
	if err != nil {
		return nil, err
	}
	b.info.mu.Lock()
	defer b.info.mu.Unlock()
	if b.info.m == nil || len(b.info.m) > 1000 {
		b.info.m = map[string]cachedInfo{}
	}
	b.info.m[key] = cachedInfo{p: p, at: time.Now()}
	return p, nil
}
