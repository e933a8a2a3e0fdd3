package amqp

import (
	"context"
	"sync"
	"time"

	"github.com/stroma/dlqbot/engine"
)

var _ engine.ReadKeeper = (*Broker)(nil)

// An approval that compares the DLQ with its preview reads it whole; the
// run of the replay it approves would read it again from its head. A read
// kept under the replay's id (ScanKeep) lets the run's cursor begin where
// the approval's read ended instead (TakeKept): every message the read saw
// is offered to the cursor's first move, in DLQ order, as a cursor's kept
// messages are, and stays held on the read's channels meanwhile, so no
// other client takes or changes what the approval compared before the run
// sends it.
//
// A read is kept only when keeping it is cheap and exact:
//   - a classic DLQ (on a quorum DLQ a cursor's give-back would spend a
//     delivery attempt of every message, which the read budget counts only
//     for scans);
//   - a whole read (no other reader, nothing held elsewhere, every message
//     ready at its start seen);
//   - at most keepMost messages (engine.TailKeep, as for a cursor's kept
//     messages) and keepBytes in memory, counting each message's body,
//     packed headers and keptOverhead (the delivery's own fields).
//     Measured through the binary, 20,000 kept messages of 1 KB raised its
//     peak resident set by about three times their bytes counted so (the
//     garbage collector lets the heap grow to twice what is live): the
//     bound keeps a kept read under about 200 MB.
//
// Otherwise ScanKeep gives everything back, as Scan does. A kept read
// nobody takes within its ttl is given back by a timer, and Close gives
// back every kept read.
const (
	keepMost     = engine.TailKeep
	keepBytes    = 64 << 20
	keptOverhead = 512
)

// keptReads are the reads kept for runs, by key.
type keptReads struct {
	mu sync.Mutex
	m  map[string]*keptRead
}

// keptRead is one kept read, as the cursor its run takes over.
type keptRead struct {
	queue string
	c     *Cursor
	timer *time.Timer
}

// ScanKeep is Scan, keeping a whole read of a classic queue within bounds
// (see above) under key for ttl instead of giving it back; kept says
// whether it did. A read already kept under key is given back first.
func (b *Broker) ScanKeep(ctx context.Context, queue, key string, ttl time.Duration, visit func(engine.Message) error) (engine.ScanInfo, bool, error) {
	b.DropKept(key)
	sc, err := b.openScan(ctx, queue)
	if err != nil {
		return sc.info, false, err
	}
	// Kept messages are packed (pack.go) as they are read; a read that
	// cannot be kept packs none.
	keeping := sc.info.QueueType == "classic" && sc.r.want <= keepMost
	if keeping {
		sc.r.forAcks() // its run's moves ack out of order
	}
	var kept []held
	size := 0
	var keep func(held)
	if keeping {
		// Sized once for the messages ready at the read's start: grown by
		// append instead, its copies took a tenth of the process's CPU
		// in a whole replay of 20,000. At most keepMost of them: 34 MB.
		kept = make([]held, 0, min(sc.r.want, keepMost))
		keep = func(h held) {
			if !keeping {
				return
			}
			h = packHeld(h)
			size += len(h.d.Body) + len(h.packed) + keptOverhead
			if len(kept) >= keepMost || size > keepBytes {
				keeping, kept = false, nil
				return
			}
			kept = append(kept, h)
		}
	}
	err = sc.read(ctx, visit, keep)
	if err != nil || !keeping || !sc.info.Coverage.Whole() || ctx.Err() != nil {
		return sc.info, false, b.endScan(sc.r, &sc.info, err)
	}
	k := &keptRead{queue: queue, c: &Cursor{b: b, r: sc.r, unacked: sc.unacked, kept: kept}}
	b.kept.mu.Lock()
	if b.kept.m == nil {
		b.kept.m = map[string]*keptRead{}
	}
	b.kept.m[key] = k
	k.timer = time.AfterFunc(ttl, func() { b.dropKept(key, k) })
	b.kept.mu.Unlock()
	return sc.info, true, nil
}

// TakeKept hands over the read kept under key as a cursor on queue. A read
// kept for another queue, or whose connection was lost meanwhile (the
// broker gave back everything it held), is given back (ok false): the run
// reads afresh.
func (b *Broker) TakeKept(key, queue string) (engine.Cursor, bool) {
	b.kept.mu.Lock()
	k := b.kept.m[key]
	delete(b.kept.m, key)
	b.kept.mu.Unlock()
	if k == nil {
		return nil, false
	}
	k.timer.Stop()
	if k.queue != queue || k.c.r.conn.IsClosed() {
		_, _ = k.c.Release()
		return nil, false
	}
	return k.c, true
}

// DropKept gives back the read kept under key, if any.
func (b *Broker) DropKept(key string) {
	b.kept.mu.Lock()
	k := b.kept.m[key]
	b.kept.mu.Unlock()
	if k != nil {
		b.dropKept(key, k)
	}
}

// dropKept gives back k, kept under key, unless it was taken or given back
// already.
func (b *Broker) dropKept(key string, k *keptRead) {
	b.kept.mu.Lock()
	mine := b.kept.m[key] == k
	if mine {
		delete(b.kept.m, key)
	}
	b.kept.mu.Unlock()
	if mine {
		k.timer.Stop()
		_, _ = k.c.Release()
	}
}

// dropAllKept gives back every kept read (Close).
func (b *Broker) dropAllKept() {
	b.kept.mu.Lock()
	all := b.kept.m
	b.kept.m = nil
	b.kept.mu.Unlock()
	for _, k := range all {
		k.timer.Stop()
		_, _ = k.c.Release()
	}
}
