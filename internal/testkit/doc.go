// Package testkit builds test fixtures on the real RabbitMQ and Redis of the
// machine: uniquely named queues that are deleted after the test, messages
// dead-lettered by the broker itself (so x-death is real), confirmed
// publishing, destructive reads to verify a queue's exact contents, and a
// per-test Redis key prefix that is cleaned up. Tests poll with deadlines
// (Eventually); nothing here sleeps to synchronise.
//
// Files:
//
//	rabbit.go      the test broker's URLs, Rabbit, queues and their deletion
//	brokers.go     the brokers a test runs on (3.10, 4.0, 4.3) and EachBroker;
//	               rotate.go which cases run on every broker
//	deadletter.go  topologies whose messages the broker dead-letters, and
//	               consumers that read what arrived
//	reference.go   reads and moves done the plainest way, to compare with
//	policy.go      policies and operator policies set through the API
//	faults.go      closing and counting connections; hangproxy.go a proxy
//	               that stops passing bytes on demand
//	redis.go       the test Redis and a key prefix cleaned up after the test
//	proc.go        a process a test started (a dlqbot binary) and its logs
//	trail.go       Trail, an audit.Recorder in memory
//	portsoff.go    engine ports switched off (TapOff, CountersOff, ConsumersOff,
//	               WatchesOff, ClaimsOff), for a test of the engine without
//	               one of the capabilities production always has
//	parallel.go    RequireParallel, that tests using the broker run in parallel
package testkit
