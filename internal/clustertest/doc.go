// Package clustertest starts private redis-server processes for tests and
// fault-injection runs: a local Redis Cluster of several masters on free
// loopback ports, or a single server that a test can kill and restart on the
// same port. Every process runs in a t.TempDir() and is killed when the test
// ends. Readiness is polled with deadlines; nothing sleeps to synchronise.
//
// The package's test (cluster_test.go) runs a whole replay against a
// three-master Cluster through store.Open("redis://h1:p1,h2:p2,h3:p3"),
// proving that every multi-key operation of the store (Lua, MULTI, WATCH)
// stays in one hash slot.
//
// Files:
//
//	redis.go  StartServer and StartCluster: redis-server processes for tests
package clustertest
