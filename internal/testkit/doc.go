// Package testkit builds test fixtures on the real RabbitMQ and Redis of the
// machine: uniquely named queues that are deleted after the test, messages
// dead-lettered by the broker itself (so x-death is real), confirmed
// publishing, destructive reads to verify a queue's exact contents, and a
// per-test Redis key prefix that is cleaned up. Tests poll with deadlines
// (Eventually); nothing here sleeps to synchronise.
package testkit
