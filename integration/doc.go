// Package integration holds dlqbot's end-to-end tests: the Slack bot, the
// engine and the store against the machine's real RabbitMQ and Redis, with
// the Slack stand-in of internal/demo/slackstub in place of Slack. Every test
// uses its own queue names and Redis key prefix, runs a worker in-process,
// and polls with deadlines instead of sleeping.
//
// The package has no non-test code; the stand-in lives with the demo,
// which ships it in the binary.
package integration
