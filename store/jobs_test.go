package store

import (
	"testing"
	"time"
)

func TestJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.st.Jobs()
	// Jobs enqueued before any worker read are delivered.
	for _, id := range []string{"r_1", "r_2"} {
		if err := j.Enqueue(e.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"r_1", "r_2"} {
		id, ack, err := j.Next(e.ctx, "w1", 100*time.Millisecond)
		if err != nil || id != want {
			t.Fatalf("next: %q %v, want %s", id, err, want)
		}
		if err := ack(); err != nil {
			t.Fatal(err)
		}
	}
	if id, ack, err := j.Next(e.ctx, "w1", 50*time.Millisecond); id != "" || ack != nil || err != nil {
		t.Errorf("empty queue: %q %v", id, err)
	}
	if id, _, err := j.Next(e.ctx, "w1", 0); id != "" || err != nil {
		t.Errorf("empty queue, no block: %q %v", id, err)
	}
	if n, _ := j.Pending(e.ctx); n != 0 {
		t.Errorf("%d jobs left after acks", n)
	}
	// Each job goes to one worker.
	if err := j.Enqueue(e.ctx, "r_3"); err != nil {
		t.Fatal(err)
	}
	id, _, err := j.Next(e.ctx, "w1", 100*time.Millisecond)
	if err != nil || id != "r_3" {
		t.Fatalf("next: %q %v", id, err)
	}
	if id, _, err := j.Next(e.ctx, "w2", 0); id != "" || err != nil {
		t.Errorf("job handed out twice: %q %v", id, err)
	}
}

func TestJobsReclaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.JobReclaim = 100 * time.Millisecond })
	j := e.st.Jobs()
	if err := j.Enqueue(e.ctx, "r_lost"); err != nil {
		t.Fatal(err)
	}
	if id, _, err := j.Next(e.ctx, "dead", 100*time.Millisecond); err != nil || id != "r_lost" {
		t.Fatalf("next: %q %v", id, err)
	}
	// "dead" never acks: after JobReclaim, another worker gets the job.
	var got string
	var ack func() error
	eventually(t, 5*time.Second, "the abandoned job to be reclaimed", func() bool {
		id, a, err := j.Next(e.ctx, "alive", 0)
		if err != nil {
			t.Fatal(err)
		}
		got, ack = id, a
		return id != ""
	})
	if got != "r_lost" {
		t.Fatalf("reclaimed %q", got)
	}
	if err := ack(); err != nil {
		t.Fatal(err)
	}
	if n, _ := j.Pending(e.ctx); n != 0 {
		t.Errorf("%d jobs left", n)
	}
}
