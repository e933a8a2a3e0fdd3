package testkit

import (
	"context"
	"strconv"
	"strings"
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

// RedisCPU is the CPU time the Redis server at RedisURL has used so far
// (INFO cpu: used_cpu_sys + used_cpu_user), or 0 when it cannot be read;
// a benchmark sets what a phase cost Redis beside what it cost the machine.
func RedisCPU() time.Duration {
	opt, err := redis.ParseURL(RedisURL)
	if err != nil {
		return 0
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var secs float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			secs += f
		}
	}
	return time.Duration(secs * float64(time.Second))
}
