// Package store keeps all of dlqbot's shared state in Redis: preview tokens
// and their frozen selections, replay records and their fenced updates,
// replay leases with fencing epochs, the replay ledger (what every replay
// sent, and which replays sent a given message), scheduled follow-up work,
// the worker registry and the job queue that hands replays to workers, each
// replay's event log that the HTTP API's event stream follows, the audit
// trail, the record of copies that came back (from the DLQs' taps) and the
// read marks that budget reads of quorum DLQs, the windows in which a
// DLQ's tap was missing, and the dashboard's signed-out sessions.
//
// Every key starts with the configured prefix (DLQBOT_REDIS_PREFIX, default
// "dlqbot:"). Keys that belong to one replay carry the hash tag
// "{<replay id>}" and keys that belong to one preview token carry
// "{<token>}", so that Redis Cluster keeps them in one slot; every Lua script
// and MULTI/EXEC in this package touches the keys of a single slot only,
// but for a ledger window on a single Redis (windowScript: the replay's
// keys and the DLQ's sent index at once), which on Cluster is two
// scripts, one per slot (ledger_window.go).
//
// Key layout (P is the prefix; every key function is in keys.go, and
// TestDocListsEveryKey checks this table against them):
//
//	P{<token>}:token        string  the frozen preview (binary format, tokencodec/encode.go; JSON or gzip JSON
//	                                from earlier releases), after "DLQS2", its header's HMAC and its
//	                                whole's HMAC when signed ("DLQS1" and one HMAC from earlier
//	                                releases; signing.go); TTL = token TTL
//	P{<token>}:used         string  id of the replay that consumed the token; same TTL
//	P{<token>}:msg          hash    where the preview was posted (channel, ts), for threading; same TTL
//	P{<replay>}:replay      hash    data (replay JSON, its version "_v" and signature last), epoch
//	                                (fencing epoch of the last Acquire), desired and desired_by (the
//	                                state an operator asked for, and who; an owner's last write sets
//	                                it to what the run became), ver (the record's version, bumped by
//	                                compare-and-set on every write) and seal (MAC of id, ver, desired
//	                                and desired_by when signed; replay_version.go)
//	P{<replay>}:lease       string  lease owner: worker id "/" random run token; PX = lease TTL
//	P{<replay>}:ledger      list    the replay's ledger log in send order: one intent record ("i")
//	                                per window of copies, as compact JSON, each entry with its MAC
//	                                ("m") and the record with its seal ("s", over its position and
//	                                its entries' MACs) when signed (ledger_sign.go, ledger_seal.go);
//	                                ledgers of earlier releases also hold confirm ("c") and abandon
//	                                ("a") records
//	P{<replay>}:acks        hash    layout ("2": every record of the ledger is a window; absent or
//	                                "mixed": read whole, as earlier releases wrote it), tally
//	                                ("<records> <MAC>": how many records the log holds, when
//	                                signed; written with each record) and the
//	                                compact confirms and abandons per copy block:
//	                                c:<copy prefix>:<block> → "c<unix ms>:<lo>-<hi>,…;a:<lo>-<hi>;…",
//	                                each segment's MAC before its ";" ("#<hex>") when signed
//	P{<replay>}:events      stream  progress events (field "e": event JSON), for the HTTP API's
//	                                event stream; capped near DefaultEventsMaxLen
//	P{<replay>}:returns     hash    copies of the replay that came back, recorded from the DLQ's
//	                                tap: n (events), base (tap arrivals when recording began),
//	                                g:<group> and r:<x-replay-count> counts, x:<group> an example
//	                                event (JSON), i:<id> the highest x-replay-count seen for that id
//	P{<replay>}:slack       hash    where the replay shows in Slack (channel, thread_ts,
//	                                progress_ts, and _sig: their HMAC when signed), owned by the Slack
//	                                front end; same retention
//	P{<replay>}:returnlog   list    the first returned events (JSON), for the failures a run lists
//	P{<replay>}:returnfloor string  with a signing key, the returns' signed floor (returns_floor.go):
//	                                "<n> <tainted 0|1> <log length> <fields> <base> <unix ms> <hex MAC>";
//	                                never lowered; TTL = retention + 1 hour
//	Psent:<dlq>             hash    per message id, the latest replays that sent it or are sending
//	                                it: "<replay>:<unix ms>:<copies>:<MAC>,…" (the MAC when signed,
//	                                ledger_sent.go), newest first, at most five, "-" once every copy
//	                                was withdrawn (the field stays); written with each window's
//	                                intents (ledger_window.go)
//	Psentfloor:<dlq>        string  with a signing key, the signed floor of that hash's field count,
//	                                as returnfloor's with 0 0 -1 for log, fields and base
//	Pclaims:<dlq>           hash    per message id, the replay that owns or sends it:
//	                                "<replay>|c|<expiry ms>" (claimed for a step), "<replay>|s|<unix ms>"
//	                                (sent), "<replay>|o|<unix ms>" (owned since its approval) or
//	                                "<replay>|t|<unix ms>" (taken over); a per-DLQ key, so its scripts
//	                                touch it alone (one Cluster slot); the field "\x00who" sums it up
//	                                per replay, "<replay>=<last write ms>=<latest claim expiry ms>;…"
//	                                (Claims.Summary), entries past the retention dropped
//	Preaders:<dlq>          hash    the readers of the DLQ now (readers.go): replay (or a read's
//	                                "read_…" id) → "s|<expiry ms>" (seeking its picks) or
//	                                "c|<expiry ms>" (a cursor open between steps); expires a day
//	                                after the last mark
//	Preads:<vhost>/<queue>  hash    the queue's read mark: count (highest delivery count the last
//	                                reads left), at (unix ms), reads (since the last whole read),
//	                                sig (their MAC when signed); written by compare-and-set
//	Pwindow:<name>          zset    a sliding window's takes (windows.go): "<id>:<n>" scored by
//	                                time taken (unix ms); the four-eyes threshold's self-approved
//	                                messages and the scan rate limit (names from package ops); when
//	                                signed also its seal, "seal <seq> <MAC>" scored +inf, over the
//	                                name, a write count and every take (windows_seal.go)
//	Ptap:<dlq>              string  how many messages the DLQ's tap has recorded in all
//	Ptapfloor:<dlq>         string  with a signing key, that count's signed floor, as returnfloor's
//	                                with 0 0 -1 for log, fields and base
//	Ptaps                   hash    DLQs with a tap → unix ms of the last AddTap
//	Ptapgap:<dlq>           hash    windows the DLQ's tap was missing: start (unix ms) → end (unix ms,
//	                                0 while still gone); at most 100, the oldest dropped
//	Preplays                zset    replay ids scored by creation time (unix ms)
//	Pactive                 set     ids of replays not in a final state (the reaper's index)
//	Pschedule               zset    timed work: deterministic members scored by due time (unix ms)
//	Pworkers                zset    worker ids scored by announcement expiry (Redis time, unix ms)
//	Pjobs                   stream  replay jobs (field "replay"), consumer group "dlqbot"
//	Paudit                  stream  the audit trail, a hash chain (audit_chain.go): field "e" entry
//	                                JSON, "p" the previous entry's hash, "h" its hash (HMAC with the
//	                                signing key); never edited; entries older than
//	                                Config.AuditRetention or past Config.AuditMaxLen trimmed on append
//	{Paudit}:anchor         string  "<id> <hash>" of the last audit entry trimmed, where the chain
//	                                that is left starts (same slot as Paudit)
//	Pauditrate:<p>:<minute> string  audit entries one principal (<p>: 64 bits of the SHA-256 of its
//	                                name) added in one minute (unix minutes); expires after 2 minutes
//	Pslackreq:<sighash>     string  a signed Slack request accepted (128 bits of the SHA-256 of its
//	                                key: timestamp and body hash); PX = 10 min, longer than the
//	                                signature stays valid
//	P{alert:<dlq>}:alert    string  the DLQ's open watch alert (alerts.go): JSON id, channel, ts,
//	                                opened, baseline, arrived, edited, then a newline and its MAC
//	                                when signed (alert_sign.go); opened unless one exists, changed
//	                                by compare-and-set of the whole value; PX 7 days
//	P{alert:<dlq>}:snooze   string  the DLQ's alerts are snoozed while it exists (PX 1 hour)
//	P{alert:<dlq>}:groups   string  the failure groups the DLQ's latest whole preview saw, for its
//	                                alerts (alerts.go): JSON engine.Arrivals, each group by id, type
//	                                and count, no text; PX 7 days
//	Palerts                 set     DLQs with an open alert (an index for listing them)
//	Pdashout:<session>      string  a dashboard session that was signed out (128 bits of a hash of its
//	                                nonce); PXAT = when the session would have expired
//
// Replay records, ledgers, event logs, returns, read marks, the tap
// counters and the tap gaps expire after the retention (Config.Retention) from their last
// write. The global keys are single keys, used by single-key commands and
// scripts only; the per-DLQ keys are written and read with pipelines of
// single-key commands, which Cluster splits by node. Lua scripts run inside
// pipelines are called by SHA (see scriptPipe).
//
// The package works with any redis.UniversalClient: a single node, Sentinel
// or Cluster (see Open for the REDIS_URL forms). Errors caused by an
// unreachable Redis wrap engine.ErrStoreUnavailable; the engine's other
// sentinel errors (ErrTokenNotFound, ErrTokenUsed, ErrReplayNotFound,
// ErrLeaseLost) are returned where the engine contract names them.
//
// Run Redis with maxmemory-policy noeviction: an eviction policy can silently
// delete leases and tokens.
//
// Files, beyond those the key layout names:
//
//	store.go, open.go    Config, Store and Open (REDIS_URL, its hosts)
//	errors.go            the store's own errors and how Redis failures are
//	                     worded (engine.ErrStoreUnavailable)
//	pipescript.go        pipelines of Lua scripts called by their SHA1
//	tokens.go            Tokens: save, load, consume and discard a preview,
//	                     encoded by package store/tokencodec (the binary
//	                     format and the JSON format before it);
//	                     tokens_header.go a preview's header alone,
//	                     tokens_message.go where a preview was posted and
//	                     tokens_release.go undoing a consume
//	replays.go           Replays: replay records; desire.go and desire_if.go
//	                     the state an operator asked for
//	leases.go            Leases: a replay's ownership and fencing epoch
//	jobs.go              Jobs: the job stream workers read
//	workers.go           Workers: the workers alive now
//	schedule.go          Schedule: follow-up checks due
//	claims.go            Claims: a DLQ's messages held by one replay at a time
//	ledger.go            Ledger: what every replay sent; ledger_acks.go the
//	                     copies acked, ledger_pages.go its pages,
//	                     ledger_sign.go the MACs of its entries and acks,
//	                     ledger_seal.go the seals of its records and its
//	                     tally, ledger_sent.go the MACs and the floor of
//	                     the DLQs' sent indexes
//	returns.go           Returns: the copies that came back; returns_floor.go
//	                     and returns_verify.go the signed floors that show
//	                     its counts lowered or deleted; tapgap.go the
//	                     windows a DLQ's tap was missing
//	readmarks.go         ReadMarks: what the last reads left on a queue
//	alerts.go            Alerts: the watch's alerts; alert_sign.go their
//	                     signatures
//	events.go            Events: each replay's event log
//	audit.go             Audit: the audit trail; audit_verify.go its check
//	sessions.go          DashboardSessions: dashboard sessions signed out
//	slackrefs.go         SlackRefs: where each replay shows in Slack
//	slackrequests.go     SlackRequests: signed Slack requests already accepted
package store
