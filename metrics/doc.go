// Package metrics exposes dlqbot's Prometheus metrics and serves them on
// /metrics (docs/operating.md "Operations").
//
// A Metrics is built on a registry with New and is an engine.Notifier: wire
// it into the engine next to the Slack notifier (engine.Notifiers{slack, m})
// and it derives, from the progress events of the replays this process runs
// or reports, the following series:
//
//	dlqbot_replay_events_total{event}        counter    progress events by kind (started, step_passed, stopped, …)
//	dlqbot_replays{state}                    gauge      replays this process last saw in each non-final state
//	                                                    (running, paused, stopped; queued stays 0: the engine emits
//	                                                    no event for it)
//	dlqbot_messages_sent_total               counter    copies the broker confirmed
//	dlqbot_messages_settled_total            counter    sent copies observed to have left their target queue
//	dlqbot_messages_returned_total           counter    copies that came back to the DLQ with a new death
//	dlqbot_messages_failed_total             counter    copies the broker did not take (unroutable, nacked) or
//	                                                    messages missing from the DLQ since the preview
//	dlqbot_messages_duplicated_total         counter    copies sent whose originals could not be acked
//	dlqbot_step_duration_seconds             histogram  canary step durations, send to settle verdict
//	dlqbot_records_refused_total{record}     counter    records in Redis that failed their check (signature,
//	                                                    version, side fields), by kind; each is also logged
//	dlqbot_watch_alerts_total{event}         counter    DLQ watch alerts opened, edited, resolved, snoozed
//	                                                    (watch.go; by the replica that won the transition)
//	dlqbot_watch_ticks_skipped_total         counter    watch ticks skipped: the queue list did not answer
//
// Message counts come from the replay record carried by each event: the first
// event of a run in this process (started or resumed) sets a baseline, and
// every later event adds what the record gained since the one before, so a
// step cut short by a pause or a cancel is counted too and a replay resumed
// here after another process ran part of it is not counted twice. The counts
// are this process's: sum them over the replicas. A run that loses its lease
// emits no event, so its replay stays in the gauge until an event about it
// (for example the reaper's "interrupted", when this process reports it)
// arrives here.
//
// The Slack layer reports its Web API calls with SlackCall and SlackRetry,
// and scans of a DLQ are reported with ScanObserved:
//
//	dlqbot_slack_calls_total{method,result}  counter    Web API calls by method, result "ok" or "error"
//	dlqbot_slack_retries_total{method}       counter    Web API calls retried (rate limits, transient errors)
//	dlqbot_scan_messages_total               counter    messages read by DLQ scans
//	dlqbot_scan_duration_seconds             histogram  scan durations
//	dlqbot_scan_rate_messages_per_second     gauge      the last scan's rate
//
// Method names become label values: pass the Web API method names
// ("chat.postMessage"), never anything derived from a request. Handler serves
// the registry in the Prometheus exposition format. No method blocks on
// anything but a short mutex, so a slow scrape never slows a replay.
//
// Files:
//
//	metrics.go  Metrics, its series and its /metrics handler
package metrics
