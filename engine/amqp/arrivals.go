package amqp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/stroma/dlqbot/engine"
)

// errNoSamples means the management API keeps no samples of a queue
// (statistics off, or none taken yet).
var errNoSamples = errors.New("the management API keeps no samples of it")

// sampleJSON is one of the management API's samples of a counter or a
// length.
type sampleJSON struct {
	Sample    int64 `json:"sample"`
	Timestamp int64 `json:"timestamp"` // ms
}

// Arrivals counts the messages that reached queue within the last span
// (an hour or less: the broker keeps per-minute samples of a queue for
// an hour by default), from one request to the management API: the
// queue's samples of the messages published into it and of its length,
// and both now. Dead-lettering is not a publish (the broker does not
// count it as one), so it counts the larger of what was published into
// the queue and how much it grew (from each sample to the next): each
// is at most what arrived, and the two series are sampled at different
// moments, so they are not added up. Messages that arrived while as
// many left count only when they were published; the length a queue had
// when the broker's statistics began, within span, counts as arrived.
// since is where the samples begin when they cover less than span, zero
// otherwise. It reads no message. A missing queue is
// engine.ErrQueueNotFound; a queue the API keeps no samples of is an
// error.
func (b *Broker) Arrivals(ctx context.Context, queue string, span time.Duration) (n int, since time.Time, err error) {
	incr := max(span/60, 5*time.Second)
	if span < incr {
		return 0, since, fmt.Errorf("amqp: arrivals in %s: span %s", queue, span)
	}
	age, step := strconv.Itoa(int(span.Seconds())), strconv.Itoa(int(incr.Seconds()))
	path := "/api/queues/" + url.PathEscape(b.mgmt.vhost) + "/" + url.PathEscape(queue) +
		"?msg_rates_age=" + age + "&msg_rates_incr=" + step + "&lengths_age=" + age + "&lengths_incr=" + step
	var q struct {
		Messages        *int64 `json:"messages"`
		MessagesDetails struct {
			Samples []sampleJSON `json:"samples"`
		} `json:"messages_details"`
		// MessageStats is absent from a queue nothing was published into.
		MessageStats *struct {
			Publish        *int64 `json:"publish"`
			PublishDetails struct {
				Samples []sampleJSON `json:"samples"`
			} `json:"publish_details"`
		} `json:"message_stats"`
	}
	if err := b.mgmt.get(ctx, path, &q); err != nil {
		if errors.Is(err, errMgmtNotFound) {
			err = engine.ErrQueueNotFound
		}
		return 0, since, fmt.Errorf("amqp: arrivals in %s: %w", queue, err)
	}
	lengths := q.MessagesDetails.Samples
	var published []sampleJSON
	if s := q.MessageStats; s != nil {
		published = s.PublishDetails.Samples
	}
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range append(lengths[:len(lengths):len(lengths)], published...) {
		first, last = min(first, s.Timestamp), max(last, s.Timestamp)
	}
	if first > last {
		return 0, since, fmt.Errorf("amqp: arrivals in %s: %w", queue, errNoSamples)
	}
	// Now, after every sample.
	if q.Messages != nil {
		lengths = append(lengths, sampleJSON{Sample: *q.Messages, Timestamp: math.MaxInt64})
	}
	if s := q.MessageStats; s != nil && s.Publish != nil {
		published = append(published, sampleJSON{Sample: *s.Publish, Timestamp: math.MaxInt64})
	}
	if time.Duration(last-first)*time.Millisecond < span-incr {
		since = time.UnixMilli(first).UTC()
	}
	return int(max(rise(published), rise(lengths))), since, nil
}

// rise sums s's growth from each sample to the next (a fall, messages
// leaving or a counter reset, counts as none): at most what arrived.
func rise(s []sampleJSON) int64 {
	sort.Slice(s, func(i, j int) bool { return s[i].Timestamp < s[j].Timestamp })
	var n int64
	for i := 1; i < len(s); i++ {
		n += max(0, s[i].Sample-s[i-1].Sample)
	}
	return n
}
