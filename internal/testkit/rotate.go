package testkit

import (
	"hash/fnv"
	"os"
	"strings"
)

// AllBrokers reports whether every case runs on every broker:
// DLQBOT_CLASSIC_ALL=1 (make test-all) puts the cases that make test
// rotates across the brokers (ClassicOn, QuorumOn) on all of them.
func AllBrokers() bool { return os.Getenv("DLQBOT_CLASSIC_ALL") != "" }

// ClassicOn returns the brokers a classic-queue case named key (a test's
// name, without its subtest path) runs on: one of Brokers(), the same one
// for the same key in every run, so that make test spreads its classic
// cases over 3.10, 4.0 and 4.3 instead of running each three times; every
// broker with DLQBOT_CLASSIC_ALL=1 (make test-all).
func ClassicOn(key string) []Broker { return rotated(key, 0) }

// QuorumOn is ClassicOn for the quorum-queue case of the same test: the
// broker after ClassicOn's pick, so that a test's two kinds run on two
// versions and make test's quorum cases, too, spread over all three. For
// a test whose claim differs by version (RequeueCounts,
// DefaultDeliveryLimit), run its quorum case on every broker (Brokers).
func QuorumOn(key string) []Broker { return rotated(key, 1) }

// rotated is the broker shift places after key's hash among Brokers(), or
// all of them with DLQBOT_CLASSIC_ALL=1.
func rotated(key string, shift uint32) []Broker {
	bs := Brokers()
	if AllBrokers() || len(bs) < 2 {
		return bs
	}
	if i := strings.IndexByte(key, '/'); i >= 0 {
		key = key[:i]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	i := (h.Sum32() + shift) % uint32(len(bs))
	return bs[i : i+1]
}
