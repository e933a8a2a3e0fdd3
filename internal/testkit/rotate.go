package testkit

import (
	"hash/fnv"
	"os"
	"strings"
)

// AllBrokers reports whether every case runs on every broker:
// DLQBOT_CLASSIC_ALL=1 (make test-all) puts the classic-queue cases that
// make test rotates across the brokers (ClassicOn) on all of them.
func AllBrokers() bool { return os.Getenv("DLQBOT_CLASSIC_ALL") != "" }

// ClassicOn returns the brokers a classic-queue case named key (a test's
// name, without its subtest path) runs on: one of Brokers(), the same one
// for the same key in every run, so that make test spreads its classic
// cases over 3.10, 4.0 and 4.3 instead of running each three times; every
// broker with DLQBOT_CLASSIC_ALL=1 (make test-all). Quorum-queue cases run
// on every broker always: use Brokers for them.
func ClassicOn(key string) []Broker {
	bs := Brokers()
	if AllBrokers() || len(bs) < 2 {
		return bs
	}
	if i := strings.IndexByte(key, '/'); i >= 0 {
		key = key[:i]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	i := h.Sum32() % uint32(len(bs))
	return bs[i : i+1]
}
