package ops

import (
	"slices"
	"testing"
	"time"
)

// TestDepthTrackGrowthWithinTheWindow: growth counts from the lowest
// depth inside the window only, and a drained DLQ has not grown.
func TestDepthTrackGrowthWithinTheWindow(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	var tr depthTrack
	keep := 5 * time.Minute
	for i, d := range []int{0, 0, 3, 8, 15, 30} {
		tr.add(t0.Add(time.Duration(i)*time.Minute), d, keep)
	}
	now := t0.Add(5 * time.Minute)
	if n, since := tr.growth(now, 5*time.Minute); n != 30 || since != 4*time.Minute {
		t.Errorf("growth within 5m = %d over %s, want 30 over 4m (from the last 0)", n, since)
	}
	if n, _ := tr.growth(now, 2*time.Minute); n != 22 {
		t.Errorf("growth within 2m = %d, want 22 (from 8)", n)
	}
	tr.add(now.Add(time.Minute), 0, keep)
	if n, _ := tr.growth(now.Add(time.Minute), 5*time.Minute); n != 0 {
		t.Errorf("growth after a drain = %d, want 0", n)
	}
	if r := perMinute(30, 2*time.Minute); r != 15 {
		t.Errorf("perMinute(30, 2m) = %v", r)
	}
}

// TestDepthTrackForgetsOldSamples: samples older than keep go, but the
// sparkline keeps its latest sparkSamples.
func TestDepthTrackForgetsOldSamples(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	var tr depthTrack
	for i := range 100 {
		tr.add(t0.Add(time.Duration(i)*time.Hour), i, time.Minute)
	}
	if len(tr.samples) != sparkSamples {
		t.Fatalf("kept %d samples, want %d", len(tr.samples), sparkSamples)
	}
	if s := tr.spark(); s[0] != 100-sparkSamples || s[len(s)-1] != 99 || !slices.IsSorted(s) {
		t.Errorf("spark = %v", s)
	}
}
