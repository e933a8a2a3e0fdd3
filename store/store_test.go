package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/engine"
)

// TestMain silences go-redis's complaints about the deliberately
// unreachable address of TestUnreachableRedis.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

type quietLogger struct{}

func (quietLogger) Printf(_ context.Context, format string, v ...any) {
	if msg := fmt.Sprintf(format, v...); !strings.Contains(msg, "127.0.0.1:1:") {
		log.Print(msg)
	}
}

// testURL is the Redis the tests use: REDIS_URL, or the local default.
func testURL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// fakeClock is a settable engine.Clock; the store only reads the time
// (its waits would be the wall clock's).
type fakeClock struct {
	engine.SystemClock
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testEnv is a Store on real Redis under a random prefix, cleaned up after
// the test.
type testEnv struct {
	st    *Store
	rdb   redis.UniversalClient
	clock *fakeClock
	ctx   context.Context
}

func newEnv(t testing.TB, mutate ...func(*Config)) *testEnv {
	t.Helper()
	return newEnvURL(t, testURL(), mutate...)
}

// newEnvURL is newEnv on the Redis at url (a private server or Cluster).
func newEnvURL(t testing.TB, url string, mutate ...func(*Config)) *testEnv {
	t.Helper()
	rdb, err := Open(url)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	var buf [6]byte
	_, _ = rand.Read(buf[:])
	cfg := Config{Prefix: "t-" + hex.EncodeToString(buf[:]) + ":"}
	for _, m := range mutate {
		m(&cfg)
	}
	clock := &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	st, err := New(cfg, rdb, clock)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	ctx := context.Background()
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("redis at %s: %v", url, err)
	}
	t.Cleanup(func() {
		if _, cluster := rdb.(*redis.ClusterClient); !cluster { // a private Cluster goes with its test
			deleteKeys(t, rdb, cfg.Prefix)
		}
		_ = rdb.Close()
	})
	return &testEnv{st: st, rdb: rdb, clock: clock, ctx: ctx}
}

// deleteKeys removes every key under prefix.
func deleteKeys(t testing.TB, rdb redis.UniversalClient, prefix string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	flush := func() {
		if len(batch) > 0 {
			if err := rdb.Unlink(ctx, batch...).Err(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
			batch = batch[:0]
		}
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			flush()
		}
	}
	flush()
	if err := iter.Err(); err != nil {
		t.Errorf("cleanup scan: %v", err)
	}
}

// eventually polls cond every 10ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	if _, err := New(Config{}, nil, nil); err == nil {
		t.Error("nil client accepted")
	}
	if _, err := New(Config{Prefix: "a{b}:"}, rdb, nil); err == nil {
		t.Error("prefix with braces accepted")
	}
	if _, err := New(Config{TokenTTL: -time.Second}, rdb, nil); err == nil {
		t.Error("negative token TTL accepted")
	}
	st, err := New(Config{}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.b.cfg
	if cfg.Prefix != "dlqbot:" || cfg.TokenTTL != 24*time.Hour {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestUnreachableRedis(t *testing.T) {
	t.Parallel()
	rdb, err := Open("redis://127.0.0.1:1/0?dial_timeout=500ms&max_retries=-1")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	st, err := New(Config{Prefix: "t-unreachable:"}, rdb, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	checks := map[string]error{
		"ping": st.Ping(ctx),
		"load": func() error { _, err := st.Tokens().Load(ctx, "p_x"); return err }(),
		"save": func() error { _, err := st.Tokens().Save(ctx, engine.Frozen{}, 0); return err }(),
		"acquire": func() error {
			_, _, err := st.Leases().Acquire(ctx, "r_x", "w", time.Second)
			return err
		}(),
		"history": func() error { _, err := st.Ledger().History(ctx, "q", []string{"m"}); return err }(),
		"get":     func() error { _, err := st.Replays().Get(ctx, "r_x"); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, engine.ErrStoreUnavailable) {
			t.Errorf("%s: got %v, want ErrStoreUnavailable", name, err)
		}
	}
}

func TestUnavailableClassification(t *testing.T) {
	t.Parallel()
	for _, err := range []error{nil, redis.Nil, context.Canceled, errors.New("WRONGTYPE x")} {
		if unavailable(err) {
			t.Errorf("%v classified unavailable", err)
		}
	}
	for _, err := range []error{errors.New("dial tcp: connect: connection refused"),
		context.DeadlineExceeded, redis.ErrPoolTimeout} {
		if !unavailable(err) {
			t.Errorf("%v not classified unavailable", err)
		}
	}
}

func TestOpenForms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url  string
		kind string
	}{
		{"", "single"},
		{"redis://127.0.0.1:6379/2", "single"},
		{"rediss://user:pw@redis.example:6380/0", "single"},
		{"redis://h1:7000,h2:7001,h3:7002", "cluster"},
		{"redis://h1:7000?addr=h2:7001", "cluster"},
		{"redis://h1:7000/0?cluster=true", "cluster"},
		{"redis://s1:26379,s2:26379/1?master=mymaster", "sentinel"},
		{"redis://:pw@s1:26379?master_name=mymaster&password=pw", "sentinel"},
	}
	for _, c := range cases {
		rdb, err := Open(c.url)
		if err != nil {
			t.Errorf("%q: %v", c.url, err)
			continue
		}
		switch cl := rdb.(type) {
		case *redis.ClusterClient:
			if c.kind != "cluster" {
				t.Errorf("%q: got a cluster client", c.url)
			} else if len(cl.Options().Addrs) < 2 && c.url != "redis://h1:7000/0?cluster=true" {
				t.Errorf("%q: seeds %v", c.url, cl.Options().Addrs)
			}
		case *redis.Client:
			if c.kind == "cluster" {
				t.Errorf("%q: got %T, want a cluster client", c.url, rdb)
			}
			if c.url == "redis://127.0.0.1:6379/2" && cl.Options().DB != 2 {
				t.Errorf("%q: db %d", c.url, cl.Options().DB)
			}
			if c.kind == "sentinel" && cl.Options().Addr != "FailoverClient" {
				t.Errorf("%q: addr %q, want a failover client", c.url, cl.Options().Addr)
			}
		default:
			t.Errorf("%q: unexpected %T", c.url, rdb)
		}
		_ = rdb.Close()
	}
	for _, bad := range []string{"http://x", "redis://h1:1,h2:2/3", "redis://h:1?nonsense=1", "redis://h:1?cluster=maybe"} {
		if rdb, err := Open(bad); err == nil {
			t.Errorf("%q accepted", bad)
			_ = rdb.Close()
		}
	}
}
