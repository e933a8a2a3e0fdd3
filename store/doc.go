// Package store keeps all of dlqbot's shared state in Redis: preview tokens
// and their frozen selections, replay records and their fenced updates,
// replay leases with fencing epochs, the replay ledger (what every replay
// sent, and which replays sent a given message), scheduled follow-up work,
// the worker registry and the job queue that hands replays to workers, and
// each replay's event log that the HTTP API's event stream follows.
//
// Every key starts with the configured prefix (DLQBOT_REDIS_PREFIX, default
// "dlqbot:"). Keys that belong to one replay carry the hash tag
// "{<replay id>}" and keys that belong to one preview token carry
// "{<token>}", so that Redis Cluster keeps them in one slot; every Lua script
// and MULTI/EXEC in this package touches the keys of a single slot only.
//
// Key layout (P is the prefix; the key functions are in keys.go, events.go
// and readmarks.go):
//
//	P{<token>}:token        string  the frozen preview (JSON, gzip-compressed when large); TTL = token TTL
//	P{<token>}:used         string  id of the replay that consumed the token; same TTL
//	P{<token>}:msg          hash    channel, ts of the Slack message the preview was posted as; same TTL
//	P{<replay>}:replay      hash    data (replay JSON), epoch (fencing epoch), desired, desired_by
//	P{<replay>}:lease       string  lease owner: worker id "/" run token; PX = lease TTL
//	P{<replay>}:ledger      list    intent ("i") and confirm ("c") records in send order
//	P{<replay>}:events      stream  progress events (field "e"), for the HTTP API's event stream
//	Psent:<dlq>             hash    per message id, the latest replays that sent it:
//	                                "<replay>:<unix ms>:<copies>,…", newest first, at most five
//	Preads:<vhost>/<queue>  hash    the queue's read mark (count, at, reads)
//	Preplays                zset    replay ids scored by creation time (unix ms)
//	Pactive                 set     ids of replays not in a final state (read by the reaper)
//	Pschedule               zset    timed work scored by due time (unix ms)
//	Pworkers                zset    worker ids scored by announcement expiry (unix ms)
//	Pjobs                   stream  replay jobs (field "replay"), consumer group "dlqbot"
//
// The package works with any redis.UniversalClient: a single node, Sentinel
// or Cluster (see Open for the REDIS_URL forms). Errors caused by an
// unreachable Redis wrap engine.ErrStoreUnavailable; the engine's other
// sentinel errors (ErrTokenNotFound, ErrTokenUsed, ErrReplayNotFound,
// ErrLeaseLost) are returned where the engine contract names them.
//
// Run Redis with maxmemory-policy noeviction: an eviction policy can silently
// delete leases and tokens.
package store
