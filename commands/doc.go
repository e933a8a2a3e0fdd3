// Package commands owns the words people type at dlqbot: the /dlq grammar
// shared by the Slack slash command and the terminal front end, the help
// text, and the permission model (docs/operating.md "Access control" shows a
// permissions file).
//
// Parse and ParseArgs turn a line into a Command (one type per subcommand)
// or into a Reply: a sentence for the user that names the mistake and shows
// the right form. A user's mistake is never a Go error. Every Command renders
// canonically with String, in the same grammar, so logs can be pasted back.
//
// Help renders the short overview and the help on each topic; Glossary
// (glossary.go) is the vocabulary every front end uses for its numbers,
// answered by help glossary and help <term>.
//
// Policy is the optional access-control file: roles bind Slack users and
// user groups to the actions read, replay and publish on queue-name globs.
// A nil *Policy means access control is off and everything is allowed. The
// Check helpers return errors that wrap ErrForbidden and read as a refusal
// the bot can show as it is. UserGroups is the port through which the bot
// supplies a user's Slack user groups; CachedGroups adds a small TTL cache.
//
// The file also names the HTTP API's and MCP endpoint's principals by the
// SHA-256 of their bearer token (Policy.Principal looks one up in constant
// time). A principal acts as "api:<name>" — a role grants it actions by
// listing it under principals — or, mapped to a Slack user with as_user, as
// that very user (the same roles, the same person for the distinct-approver
// rule).
//
// The package does not talk to Slack, RabbitMQ or Redis: it only imports
// engine for the types a command carries (engine.Selection, engine.Params).
//
// Files:
//
//	command.go             the parsed commands (Command and its kinds)
//	grammar.go             Parse and ParseAs: one command line to a Command;
//	                       lexer.go its words, preview.go selections and
//	                       replay parameters, values.go their values and
//	                       defaults
//	help.go                the help text, by topic
//	permissions.go         Policy, its actions, roles and grants, and
//	                       ForbiddenError; policy_yaml.go reads the
//	                       permissions file, policy_principals.go its
//	                       principals, policy_redaction.go its redaction
//	                       and channel rules, policy_named.go the queues
//	                       its grants name, policy_watch.go its watch:
//	                       section (the DLQs `dlqbot serve` watches)
//	principals.go          principals: API tokens, terminal identities
//	usergroups.go          UserGroups and its cache
package commands
