// Package letter reads one dead letter: from a message's headers and body
// it derives what dlqbot knows about it (Meta: where it came from, why and
// when it died, how often it was tried, its id and failure group), and it
// writes the headers of the copy a replay sends (docs/design.md
// "Dead-letter dialects").
//
// It owns that reading and nothing else: it knows no queue, no broker, no
// store and no replay, and imports nothing of the module but the standard
// library (internal/doccheck checks this). Package engine scans DLQs and
// replays their messages with it; engine/aliases.go gives its names
// to the packages outside the engine as engine.Meta, engine.Message and so
// on.
//
// Where each part lives:
//
//	message.go      Message (a message as read), Dialect, Reason and Meta
//	meta.go         ParseMetaDialect: the dialect picked, its parser run,
//	                the source checked, the id and failure group filled;
//	                the capped list of Meta.Problems and the typed header reads
//	dialects.go     the parsers of RabbitMQ's own dead-lettering (x-death,
//	                x-first-death-*), Spring AMQP, MassTransit and NServiceBus
//	rascal.go       the parser of rascal's (Node.js) headers.rascal table
//	inhouse.go      HeaderDialect: an in-house framework's headers, named by
//	                the operator (ParseHeaderDialect), and their parser
//	headers.go      header values read defensively, whatever type a client
//	                library decoded (tables, arrays, strings, integers, times,
//	                decimals), the limits on the work done per message, and
//	                HeaderString, a value as one string
//	fingerprint.go  Fingerprint, a copy's id (Meta.ID), and the digest of a
//	                copy that has no failure time
//	group.go        NormaliseException, the failure group's text
//	failuretype.go  FailureType, what a channel may see of a failure, and
//	                the checks of queue names taken from headers
//	                (QueueNameProblem, BadNameRune, MixedScripts)
//	rewrite.go      ReplayHeaders, the headers of a replayed copy: the
//	                death headers, CC and BCC and rascal's retry state
//	                removed, x-replay-id and x-replay-count set
//
// Nothing here panics on a header of an unexpected type, and the work per
// message is bounded however large its headers are (headers.go).
package letter
