package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"github.com/stroma/dlqbot/redact"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine/amqp"
	"github.com/stroma/dlqbot/internal/demo"
	"github.com/stroma/dlqbot/internal/demo/slackstub"
)

// Demo defaults: the page's address and the Redis prefix, kept apart from
// a real deployment's "dlqbot:".
const (
	demoAddr        = "127.0.0.1:8088"
	demoRedisPrefix = "dlqbot-demo:"
)

// demoCommand runs the whole flow on this machine without a Slack workspace: the
// Slack stand-in's page (the one URL printed on stdout), the bot pointed
// at it, a worker, the reaper and the follow-ups exactly as serve runs
// them, and demo traffic (a seeded DLQ and two consumers). It checks
// RabbitMQ and Redis first and says how to start whichever is missing. It
// runs until ctx ends.
func demoCommand(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dlqbot demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", demoAddrFrom(cfg), "address of the demo page (DLQBOT_HTTP_ADDR)")
	prefix := fs.String("queues", "demo", "prefix of the demo's queues: <prefix>.dlq, <prefix>.orders, <prefix>.payments (they are reset)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dlqbot demo [--addr host:port] [--queues prefix]\n\n"+
			"Runs dlqbot with a local Slack stand-in: open the printed URL, type /dlq commands, click the buttons.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError("dlqbot demo: %w", err)
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usageError("dlqbot demo: unexpected argument %q", fs.Arg(0))
	}
	ownPrefix := !cfg.redisPrefixSet
	if ownPrefix {
		cfg.RedisPrefix = demoRedisPrefix
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	cfg.SlackSigningSecret = hex.EncodeToString(secret)
	cfg.SlackBotToken, cfg.SlackAppToken = "xoxb-dlqbot-demo", ""
	cfg.ActivityChannel = demo.ActivityChannel
	cfg.AccessOpen = cfg.AccessOpen || cfg.PermissionsFile == "" // the demo's stand-in workspace is the newcomer's own

	err := runDemo(ctx, cfg, *addr, demo.NewQueues(*prefix), ownPrefix, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "dlqbot demo:", err)
	}
	return err
}

// runDemo starts the demo's parts in order — nothing is reset before the
// services answered and the page's port was free — and runs them until
// ctx ends.
func runDemo(ctx context.Context, cfg config, addr string, q demo.Queues, resetRedis bool, stdout, stderr io.Writer) error {
	a, err := openApp(cfg, demoLog(stderr))
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.checkServices(ctx); err != nil {
		return failed(err)
	}
	stub, err := slackstub.Listen(addr, cfg.SlackSigningSecret)
	if err != nil {
		return failed(fmt.Errorf("cannot serve the demo page on %s: %w; choose another address with --addr or DLQBOT_HTTP_ADDR", addr, err))
	}
	defer stub.Close()
	botLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return failed(fmt.Errorf("listen for the bot: %w", err))
	}
	a.cfg.SlackAPIURL = stub.APIURL()
	dashToken := ""
	if cfg.PermissionsFile == "" {
		if a.demoDashboard, dashToken, err = demoDashboardPolicy(); err != nil {
			_ = botLn.Close()
			return failed(err)
		}
	}
	r, err := a.newReplica()
	if err != nil {
		_ = botLn.Close()
		return err
	}
	if resetRedis {
		if err := clearPrefix(ctx, a.rdb, cfg.RedisPrefix); err != nil {
			_ = botLn.Close()
			return failed(fmt.Errorf("reset the demo's Redis keys (%s*): %w", cfg.RedisPrefix, err))
		}
	}
	if _, err := demo.StartTraffic(ctx, firstNode(cfg.AMQPURL), q); err != nil {
		_ = botLn.Close()
		return failed(fmt.Errorf("seed the demo queues: %w", err))
	}
	stub.SetWeb(demo.Web(q, "http://"+botLn.Addr().String(), demo.Channel, demo.ActivityChannel))
	stub.Mount("/dashboard/", r.mux)
	fmt.Fprintln(stdout, stub.URL())
	fmt.Fprintf(stderr, "dlqbot demo: open %s — %s holds 80 dead letters from %s and %s; Redis keys under %q; Ctrl-C stops\n",
		stub.URL(), q.DLQ, q.Orders, q.Payments, cfg.RedisPrefix)
	if dashToken != "" {
		fmt.Fprintf(stderr, "dlqbot demo: the dashboard is at %s/dashboard/ — sign in with the token %s\n", stub.URL(), dashToken)
	} else {
		fmt.Fprintf(stderr, "dlqbot demo: the dashboard is at %s/dashboard/ — sign in with a principal's token from %s\n", stub.URL(), cfg.PermissionsFile)
	}
	return r.run(ctx, botLn)
}

// checkServices tells which of RabbitMQ, its management API and Redis does
// not answer, and how to start it.
func (a *app) checkServices(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := a.broker.Ping(ctx); err != nil {
		return fmt.Errorf("RabbitMQ is not reachable at %s (AMQP_URL): %v\n"+
			"  start it with: rabbitmq-server -detached && rabbitmq-plugins enable rabbitmq_management", amqp.RedactList(a.cfg.AMQPURL), err)
	}
	if err := managementUp(ctx, firstNode(a.cfg.ManagementURL)); err != nil {
		return fmt.Errorf("the RabbitMQ management API is not reachable at %s (RABBITMQ_MANAGEMENT_URL): %v\n"+
			"  enable it with: rabbitmq-plugins enable rabbitmq_management", amqp.RedactList(a.cfg.ManagementURL), err)
	}
	if err := a.store.Ping(ctx); err != nil {
		return fmt.Errorf("Redis is not reachable at %s (REDIS_URL): %v\n"+
			"  start it with: redis-server --daemonize yes", redact.URL(a.cfg.RedisURL), err)
	}
	return nil
}

// firstNode is the first URL of a node list (AMQP_URL may list a
// cluster's nodes): the demo's own traffic and checks use one node.
func firstNode(list string) string {
	nodes, err := amqp.Nodes(list)
	if err != nil {
		return list
	}
	return nodes[0]
}

// managementUp asks the management API for its overview.
func managementUp(ctx context.Context, raw string) error {
	u, err := url.Parse(strings.TrimSuffix(raw, "/") + "/api/overview")
	if err != nil {
		return errors.New("not a URL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	if u.User != nil {
		pw, _ := u.User.Password()
		req.SetBasicAuth(u.User.Username(), pw)
		req.URL.User = nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL may hold a password
		}
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /api/overview: %s", resp.Status)
	}
	return nil
}

// clearPrefix deletes every key under prefix, so each demo starts afresh.
func clearPrefix(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	del := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return del(ctx, c) })
	}
	return del(ctx, rdb)
}

// demoLog writes the demo's logs for a person: one readable line each,
// coloured on a terminal.
func demoLog(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	return zerolog.ConsoleWriter{Out: w, NoColor: !tty, TimeFormat: "15:04:05"}
}

// demoAddrFrom is the demo page's address: DLQBOT_HTTP_ADDR when set, else
// the demo's own default (not serve's :8080).
func demoAddrFrom(cfg config) string {
	if cfg.httpAddrSet {
		return cfg.HTTPAddr
	}
	return demoAddr
}

// demoSignInNote is what the demo dashboard's sign-in page says about
// its token: the demo has no permissions file.
const demoSignInNote = "The demo's own token: dlqbot demo printed it where it started (“sign in with the token demo-…”). It acts as the demo's Slack user, who may do everything."

// demoDashboardPolicy is the demo's sign-in for its dashboard: one
// principal, "demo", acting as the stand-in's user, with a fresh random
// token. Access control stays off (no permissions file), so the demo user
// may do everything there as in the stand-in.
func demoDashboardPolicy() (*commands.Policy, string, error) {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	tok := "demo-" + hex.EncodeToString(b)
	p, err := commands.ParsePolicy([]byte("principals:\n  - name: demo\n    token_sha256: " + commands.HashToken(tok) +
		"\n    as_user: " + demo.User + "\nroles:\n  - name: demo\n    users: [" + demo.User + "]\n    grants:\n      - queues: [\"*\"]\n        actions: [read, replay, publish]\n"))
	if err != nil {
		return nil, "", fmt.Errorf("the demo dashboard's sign-in: %w", err)
	}
	return p, tok, nil
}
