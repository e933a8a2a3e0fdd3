// Package store keeps all of dlqbot's shared state in Redis: preview tokens
// and their frozen selections, replay records and their fenced updates,
// replay leases with fencing epochs, the replay ledger (what every replay
// sent, and which replays sent a given message), scheduled follow-up work,
// the worker registry and the job queue that hands replays to workers, each
// replay's event log that the HTTP API's event stream follows, the record of
// copies that came back (from the DLQs' taps) and the read marks that budget
// reads of quorum DLQs.
//
// Every key starts with the configured prefix (DLQBOT_REDIS_PREFIX, default
// "dlqbot:"). Keys that belong to one replay carry the hash tag
// "{<replay id>}" and keys that belong to one preview token carry
// "{<token>}", so that Redis Cluster keeps them in one slot; every Lua script
// and MULTI/EXEC in this package touches the keys of a single slot only.
//
// The key layout, every key with its type and contents, is listed once, in
// keys.go beside the functions that build the keys.
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
