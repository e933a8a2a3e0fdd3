package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis returns a client for the test Redis and a key prefix unique to the
// test; every key under the prefix is deleted after the test.
func Redis(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	opt, err := redis.ParseURL(RedisURL)
	if err != nil {
		t.Fatalf("testkit: REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opt)
	prefix := Name("r") + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		_ = rdb.Close()
	})
	return rdb, prefix
}
