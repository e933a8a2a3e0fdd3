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

// Depths is queue's message count at the end of each bucket of the last
// span, oldest first, the last one now, from the management API's length
// samples. (Its publish samples would not do for a DLQ: dead-lettering
// is not a publish, and the broker does not count it as one.) The broker
// keeps per-minute samples of a queue for an hour by default
// (sample_retention_policies); a bucket it kept nothing for, or from
// before the queue existed, is 0. A missing queue is
// engine.ErrQueueNotFound.
func (b *Broker) Depths(ctx context.Context, queue string, span, bucket time.Duration) ([]int, error) {
	if bucket < time.Second || span < bucket {
		return nil, fmt.Errorf("amqp: depths of %s: bucket %s and span %s", queue, bucket, span)
	}
	path := "/api/queues/" + url.PathEscape(b.mgmt.vhost) + "/" + url.PathEscape(queue) +
		"?lengths_age=" + strconv.Itoa(int(span.Seconds())) + "&lengths_incr=" + strconv.Itoa(int(bucket.Seconds()))
	var q struct {
		Messages        *int64 `json:"messages"`
		MessagesDetails struct {
			Samples []struct {
				Sample    int64 `json:"sample"`
				Timestamp int64 `json:"timestamp"`
			} `json:"samples"`
		} `json:"messages_details"`
	}
	if err := b.mgmt.get(ctx, path, &q); err != nil {
		if errors.Is(err, errMgmtNotFound) {
			err = engine.ErrQueueNotFound
		}
		return nil, fmt.Errorf("amqp: depths of %s: %w", queue, err)
	}
	n := int(span / bucket)
	out := make([]int, n)
	smp := q.MessagesDetails.Samples
	sort.Slice(smp, func(i, j int) bool { return smp[i].Timestamp > smp[j].Timestamp })
	// out[n-1] is now; the samples, newest first, fill the buckets before.
	for i := 0; i < len(smp) && i < n-1; i++ {
		out[n-2-i] = int(smp[i].Sample)
	}
	if q.Messages != nil {
		out[n-1] = int(*q.Messages)
	} else if len(smp) > 0 {
		out[n-1] = int(smp[0].Sample)
	}
	return out, nil
}
