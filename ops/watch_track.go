package ops

import "time"

// depthTrack is one DLQ's recent depths as this replica sampled them,
// oldest first: enough to tell how much it grew within a watch window
// and to draw its sparkline. It is this process's own view; what an
// alert says is shared is in the AlertStore.
type depthTrack struct {
	samples []depthSample
}

type depthSample struct {
	at    time.Time
	depth int
}

// sparkSamples is how many of the latest samples an alert's sparkline
// draws.
const sparkSamples = 24

// add records depth at now and forgets samples older than keep, keeping
// at least the latest sparkSamples.
func (t *depthTrack) add(now time.Time, depth int, keep time.Duration) {
	t.samples = append(t.samples, depthSample{now, depth})
	cut := 0
	for cut < len(t.samples)-sparkSamples && now.Sub(t.samples[cut].at) > keep {
		cut++
	}
	t.samples = t.samples[cut:]
}

// growth is how far the latest depth is above the lowest one sampled
// within the window before it, and how long ago the latest such low was (0 when
// the depth did not grow). Dead letters that arrived while others left
// (a replay draining the DLQ) count only as far as the depth rose.
func (t *depthTrack) growth(now time.Time, within time.Duration) (n int, since time.Duration) {
	if len(t.samples) == 0 {
		return 0, 0
	}
	last := t.samples[len(t.samples)-1]
	low := last
	for _, s := range t.samples {
		if now.Sub(s.at) <= within && s.depth <= low.depth && s.at.Before(last.at) {
			low = s
		}
	}
	return last.depth - low.depth, last.at.Sub(low.at)
}

// perMinute is n arrivals over d as a rate per minute; a span shorter
// than a second counts as a second.
func perMinute(n int, d time.Duration) float64 {
	if d < time.Second {
		d = time.Second
	}
	return float64(n) / d.Minutes()
}

// spark is the latest depths, oldest first, for a sparkline.
func (t *depthTrack) spark() []int {
	s := t.samples
	if len(s) > sparkSamples {
		s = s[len(s)-sparkSamples:]
	}
	out := make([]int, len(s))
	for i, x := range s {
		out[i] = x.depth
	}
	return out
}
