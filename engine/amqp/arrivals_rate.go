package amqp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// Arrivals counts the messages that reached queue in each bucket of the
// last span, oldest first (the last bucket is the one under way), from the management API's publish samples
// (dead letters count as publishes into their DLQ). The broker keeps
// per-minute samples of a queue for an hour by default
// (sample_retention_policies), so span and bucket beyond that come back
// with zeros where it kept nothing. A queue without statistics yet (idle)
// has all zeros; a missing one is engine.ErrQueueNotFound.
func (b *Broker) Arrivals(ctx context.Context, queue string, span, bucket time.Duration) ([]int, error) {
	if bucket <= 0 || span < bucket {
		return nil, fmt.Errorf("amqp: arrivals %s: bucket %s and span %s", queue, bucket, span)
	}
	path := "/api/queues/" + url.PathEscape(b.mgmt.vhost) + "/" + url.PathEscape(queue) +
		"?msg_rates_age=" + strconv.Itoa(int(span.Seconds())) + "&msg_rates_incr=" + strconv.Itoa(int(bucket.Seconds()))
	var q struct {
		MessageStats struct {
			PublishDetails struct {
				Samples []struct {
					Sample    int64 `json:"sample"`
					Timestamp int64 `json:"timestamp"`
				} `json:"samples"`
			} `json:"publish_details"`
		} `json:"message_stats"`
	}
	if err := b.mgmt.get(ctx, path, &q); err != nil {
		if errors.Is(err, errMgmtNotFound) {
			err = engine.ErrQueueNotFound
		}
		return nil, fmt.Errorf("amqp: arrivals %s: %w", queue, err)
	}
	n := int(span / bucket)
	out := make([]int, n)
	smp := q.MessageStats.PublishDetails.Samples
	sort.Slice(smp, func(i, j int) bool { return smp[i].Timestamp < smp[j].Timestamp })
	if len(smp) < 2 {
		return out, nil
	}
	// The samples end at the last whole bucket; what arrived since is the
	// current counter (the latest 5 s statistics) less the last sample.
	if now, err := b.mgmt.queue(ctx, queue, false); err == nil {
		if d := now.MessageStats.Publish - smp[len(smp)-1].Sample; d > 0 {
			out[n-1] += int(d)
		}
	}
	end := time.UnixMilli(smp[len(smp)-1].Timestamp)
	for i := 1; i < len(smp); i++ {
		d := smp[i].Sample - smp[i-1].Sample
		if d <= 0 {
			continue
		}
		k := n - 2 - int(end.Sub(time.UnixMilli(smp[i].Timestamp))/bucket)
		if k >= 0 && k < n {
			out[k] += int(d)
		}
	}
	return out, nil
}
