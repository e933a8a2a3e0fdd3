// Command dlqbot previews and replays messages out of RabbitMQ dead-letter
// queues: `dlqbot serve` runs the Slack bot and worker, `dlqbot demo` the
// whole flow with a local Slack stand-in, and any other subcommand is the
// terminal front end (`dlqbot preview orders.dlq reason=rejected`).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/stroma/dlqbot/commands"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	os.Exit(exitCode(err))
}

// run dispatches to serve, demo or the terminal front end, each under the
// default soft memory limit (setMemLimit) unless GOMEMLIMIT is set.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	setMemLimit(getenv)
	cfg, err := loadConfig(getenv)
	if err != nil {
		return configFailed(args, stdout, stderr, err)
	}
	if len(args) > 0 {
		switch args[0] {
		case "serve":
			return serve(ctx, cfg, stderr)
		case "demo":
			return demoCommand(ctx, cfg, args[1:], stdout, stderr)
		case "mcp":
			return mcpCommand(ctx, cfg, args[1:], stderr)
		case "audit":
			return auditCommand(ctx, cfg, args[1:], stdout, stderr)
		}
	}
	return terminal(ctx, cfg, args, stdout, stderr, getenv)
}

// configFailed reports a bad setting where the subcommand reports its
// errors: serve, demo and mcp on stderr, the terminal front end on stdout
// (one JSON document with --json).
func configFailed(args []string, stdout, stderr io.Writer, err error) error {
	if len(args) > 0 && slices.Contains([]string{"serve", "demo", "mcp"}, args[0]) {
		fmt.Fprintln(stderr, "dlqbot:", err)
		return err
	}
	_, flags := commands.ParseArgs(args, time.Now())
	return (&output{w: stdout, json: flags.JSON}).fail(err)
}

// exitCode maps run's error to its exit status: 0 success, 1 a refused or
// failed action, 2 bad usage or configuration (docs/using.md "The
// terminal").
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailed
}

// failed wraps err as a refused or failed action (exit 1).
func failed(err error) error { return &exitError{code: exitFailed, err: err} }
