package clustertest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stroma/dlqbot/internal/testkit"
)

// Available reports, as an error naming what is missing, whether the
// redis-server and redis-cli binaries are on PATH.
func Available() error {
	var missing []string
	for _, b := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s not found on PATH (install Debian's redis-server and redis-tools)", strings.Join(missing, " and "))
	}
	return nil
}

// FreePort returns a loopback TCP port that was free a moment ago. When bus
// is true, port+10000 (a Cluster node's bus port) was free too.
func FreePort(t testing.TB, bus bool) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("clustertest: free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !bus {
			return port
		}
		if port+10000 > 65535 {
			continue
		}
		lb, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		if err != nil {
			continue
		}
		_ = lb.Close()
		return port
	}
	t.Fatal("clustertest: no free port pair found")
	return 0
}

// Server is one private redis-server process.
type Server struct {
	t    testing.TB
	Port int
	// Dir holds the server's files (log, cluster config, AOF).
	Dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartServer starts redis-server on a free loopback port in a fresh
// directory, with no RDB snapshots, maxmemory-policy noeviction and extra
// arguments appended (e.g. "--appendonly", "yes"), and waits until it
// answers PING. It is killed when the test ends.
func StartServer(t testing.TB, extra ...string) *Server {
	t.Helper()
	return startServer(t, FreePort(t, false), extra...)
}

func startServer(t testing.TB, port int, extra ...string) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{t: t, Port: port, Dir: dir}
	s.args = append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"), "--save", "", "--daemonize", "no",
		"--maxmemory-policy", "noeviction",
	}, extra...)
	t.Cleanup(s.Kill)
	s.Start()
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is the server's REDIS_URL.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Start (re)starts the process with its original arguments, in the same
// directory and on the same port, and waits until it answers PING.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		select {
		case <-s.done:
		default:
			s.t.Fatalf("clustertest: redis on %d is still running", s.Port)
		}
	}
	cmd := exec.Command("redis-server", s.args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("clustertest: start redis-server: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); close(done) }()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	testkit.Eventually(s.t, 10*time.Second, "redis-server on "+s.Addr()+" to answer PING", func() bool {
		select {
		case <-done:
			s.t.Fatalf("clustertest: redis-server on %d exited at start; log:\n%s", s.Port, s.Log())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		return rdb.Ping(ctx).Err() == nil
	})
}

// Kill sends SIGKILL (a crash: nothing is flushed) and waits for the
// process to exit. It does nothing if the server is not running.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Running reports whether the process is alive.
func (s *Server) Running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Log returns the server's log file (for failure messages).
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	return string(b)
}

// StartCluster starts masters redis-server processes in Cluster mode on free
// loopback ports, joins them with `redis-cli --cluster create …
// --cluster-replicas 0`, waits until every node reports cluster_state:ok
// with all 16384 slots assigned and knows every other node, and returns the
// nodes' addresses. The processes are killed when the test ends.
func StartCluster(t testing.TB, masters int) []string {
	t.Helper()
	nodes := make([]*Server, masters)
	addrs := make([]string, masters)
	for i := range nodes {
		port := FreePort(t, true)
		nodes[i] = startServer(t, port, "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000", "--appendonly", "no")
		addrs[i] = nodes[i].Addr()
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("clustertest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	clients := make([]*redis.Client, masters)
	for i, a := range addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a})
		defer clients[i].Close()
	}
	testkit.Eventually(t, 20*time.Second, "cluster_state:ok on every node", func() bool {
		for _, c := range clients {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_slots_ok:16384") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(masters)) {
				return false
			}
		}
		return true
	})
	return addrs
}
