package main

// Files of the dlqbot command (its package comment is in main.go):
//
//	main.go            run: serve, demo, mcp or the terminal front end
//	config.go          the environment's configuration; memlimit.go the
//	                   memory limit's default; signing.go the signing key
//	wire.go            app: the store, engine and operations every
//	                   subcommand builds on
//	serve.go           `dlqbot serve`: a replica (workers, Slack, the HTTP
//	                   server); httpserver.go its HTTP timeouts
//	api.go             the HTTP API and `dlqbot mcp`; dashboard.go the
//	                   dashboard on the HTTP server
//	demo.go            `dlqbot demo`
//	terminal.go        the terminal front end's commands; direct.go when it
//	                   may run them itself; remote.go through a dlqbot
//	                   server's HTTP API, remote_mcp.go `dlqbot mcp` as its
//	                   client; follow.go following a replay's progress
//	park.go            `dlqbot park`
//	audit.go           `dlqbot audit`; auditverify.go `dlqbot audit verify`
//	print.go           the terminal's reports; print_verdict.go a
//	                   preview's headline and problems, print_arrivals.go
//	                   arrivals, print_dlqs.go the list of DLQs,
//	                   print_details.go a preview's mechanics (--details)
//	human.go           what the terminal shows of logs and errors;
//	                   live.go its live progress line
