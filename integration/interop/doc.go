// Package interop holds dlqbot's interoperability tests: consumers written
// on real client libraries that nobody here wrote — npm's rascal (its three
// recovery strategies: forward, republish then nack, republish with
// immediateNack) and amqplib, and Debian's python3-pika — dead-letter real
// messages on the machine's RabbitMQ 3.10 and 4.0, and the tests compare
// what dlqbot's engine says (counts, reasons, source queues, attempts,
// failure groups, returns, finished replays) with what those consumers saw.
//
// setup.sh installs what they need (Node.js and npm, the npm packages locked
// in testdata/node/package-lock.json with npm ci, python3-pika); the tests
// run it once per run. The consumers are testdata/node/consumer.js and
// testdata/python/consumer.py. The package has no non-test code.
package interop
