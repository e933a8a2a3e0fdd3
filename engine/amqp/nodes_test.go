package amqp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/internal/testkit"
)

// TestNodeLists: a comma-separated list of node URLs is split in order,
// spaces trimmed; an empty entry, a node of another vhost or a bad URL is
// a clear error that never echoes a password, and New refuses it.
func TestNodeLists(t *testing.T) {
	t.Parallel()
	nodes, err := parseAMQPNodes(" amqp://u:p@n1:5672/vh , amqp://u:p@n2:5672/vh,amqps://u:p@n3/vh")
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, n := range nodes {
		hosts = append(hosts, n.endpoint)
		if n.uri.Vhost != "vh" {
			t.Errorf("%s: vhost %q, want vh", n.endpoint, n.uri.Vhost)
		}
	}
	if got := strings.Join(hosts, ","); got != "n1:5672,n2:5672,n3" {
		t.Errorf("nodes %s, want n1:5672,n2:5672,n3 in order", got)
	}
	ms, err := parseMgmtNodes("http://u:p@n1:15672/,https://n2:15671/prefix")
	if err != nil || len(ms) != 2 || ms[0].base != "http://n1:15672" || !ms[0].auth || ms[1].base != "https://n2:15671/prefix" || ms[1].auth {
		t.Fatalf("management nodes %+v, %v", ms, err)
	}

	for _, c := range []struct {
		amqpURL, mgmtURL, want string
	}{
		{"amqp://u:s3cret@n1/,,amqp://u:s3cret@n2/", "", "entry 2 of 3 is empty"},
		{"amqp://u:s3cret@n1/,", "", "entry 2 of 2 is empty"},
		{"amqp://u:s3cret@n1/a,amqp://u:s3cret@n2/b", "", "different vhosts"},
		{"amqp://u:s3cret@n1/,http://u:s3cret@n2/", "", "invalid AMQP URL"},
		{"", "http://u:s3cret@n1:15672,amqp://u:s3cret@n2:15672", "invalid management URL"},
		{"", "http://u:s3cret@n1:15672, ", "entry 2 of 2 is empty"},
	} {
		_, err := New(Config{URL: c.amqpURL, ManagementURL: c.mgmtURL})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%q, %q) = %v, want an error saying %q", c.amqpURL, c.mgmtURL, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q, %q): the error echoes a password: %v", c.amqpURL, c.mgmtURL, err)
		}
	}
	if got := RedactList("amqp://u:s3cret@n1/,amqp://u:s3cret@n2/"); strings.Contains(got, "s3cret") {
		t.Errorf("RedactList leaks a password: %s", got)
	}
}

// TestFailoverToLiveNode: with a dead node first in both lists, the Broker
// connects to the live one, and the management API is asked of it; the
// broker's own view (its connection list, its queue counts) agrees.
func TestFailoverToLiveNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := e.queue("t-failover", nil)
	e.publish(q, testMessages(3))
	e.waitReady(q, 3)
	name := testkit.Name("conn-failover")
	b := testBroker(t, Config{
		URL:            "amqp://guest:guest@127.0.0.1:1/," + DefaultURL,
		ManagementURL:  "http://guest:guest@127.0.0.1:1," + DefaultManagementURL,
		ConnectionName: name,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := b.Inspect(ctx, q)
	if err != nil || !st.Exists || st.Ready != 3 {
		t.Fatalf("Inspect through the live node = %+v, %v; want 3 ready", st, err)
	}
	if got, want := b.conns.node(), hostOf(DefaultURL); got != want {
		t.Errorf("connected through %s, want the live node %s", got, want)
	}
	testkit.Eventually(t, 20*time.Second, "the live broker listing the connection "+name, func() bool {
		return testkit.Rabbit3.CountConnections(t, name) == 1
	})
	testkit.Eventually(t, 20*time.Second, "the management API's count of "+q, func() bool {
		s, err := b.QueueStats(ctx, q)
		return err == nil && s.Sampled && s.Ready == 3
	})

	// Every node dead: a clear ErrBrokerUnavailable naming how many were tried.
	dead := testBroker(t, Config{URL: "amqp://guest:s3cret@127.0.0.1:1/,amqp://guest:s3cret@127.0.0.1:2/",
		ManagementURL: "http://guest:s3cret@127.0.0.1:1,http://guest:s3cret@127.0.0.1:2"})
	_, err = dead.Inspect(ctx, q)
	if !errors.Is(err, engine.ErrBrokerUnavailable) || !strings.Contains(err.Error(), "any of the 2 nodes") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Inspect with every node dead: %v; want ErrBrokerUnavailable naming the 2 nodes, no password", err)
	}
	_, err = dead.QueueStats(ctx, q)
	if !errors.Is(err, engine.ErrBrokerUnavailable) || !strings.Contains(err.Error(), "none of the 2 management API nodes") {
		t.Errorf("QueueStats with every node dead: %v; want ErrBrokerUnavailable naming the 2 nodes", err)
	}
}

// TestReconnectToNextNode: after losing its connection the Broker dials
// the node after the one it lost. The two shared brokers stand in for two
// nodes (they are not a cluster: the test only follows the connection);
// each broker's connection list shows where it went, and the read that
// was under way reports the lost node as an engine.NodeLostError.
func TestReconnectToNextNode(t *testing.T) {
	t.Parallel()
	testkit.Rabbit4.Require(t)
	name := testkit.Name("conn-next")
	b := testBroker(t, Config{URL: testkit.Rabbit3.AMQPURL + "," + testkit.Rabbit4.AMQPURL,
		ManagementURL: testkit.Rabbit3.ManagementURL + "," + testkit.Rabbit4.ManagementURL, ConnectionName: name})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e := newEnv(t)
	q := e.queue("t-next", nil)
	e.publish(q, testMessages(5))
	e.waitReady(q, 5)

	// A scan that holds the first message while its connection is closed.
	held, release := make(chan struct{}), make(chan struct{})
	var seen atomic.Int32
	scanErr := make(chan error, 1)
	go func() {
		_, err := b.Scan(ctx, q, func(engine.Message) error {
			if seen.Add(1) == 1 {
				close(held)
				<-release
			}
			return nil
		})
		scanErr <- err
	}()
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the scan saw no message")
	}
	lostNode := b.conns.node()
	if lostNode != hostOf(testkit.Rabbit3.AMQPURL) {
		t.Fatalf("connected first through %s, want the first node %s", lostNode, hostOf(testkit.Rabbit3.AMQPURL))
	}
	testkit.Eventually(t, 20*time.Second, "the scan's connection listed by 3.10", func() bool {
		return testkit.Rabbit3.CountConnections(t, name) > 0
	})
	testkit.Rabbit3.CloseConnections(t, name)
	testkit.Eventually(t, 20*time.Second, "the connection closed", func() bool {
		b.conns.mu.Lock()
		defer b.conns.mu.Unlock()
		return b.conns.conn.IsClosed()
	})
	close(release)
	err := <-scanErr
	var lost *engine.NodeLostError
	if !errors.As(err, &lost) || lost.Node != lostNode || !errors.Is(err, engine.ErrBrokerUnavailable) {
		t.Fatalf("the scan whose connection closed returned %v; want a NodeLostError for %s", err, lostNode)
	}
	e.waitReady(q, 5) // the broker gave the held messages back

	if _, err := b.Inspect(ctx, q); err != nil {
		t.Fatalf("Inspect after the loss: %v", err)
	}
	if got := b.conns.node(); got != hostOf(testkit.Rabbit4.AMQPURL) {
		t.Errorf("after losing %s reconnected through %s, want the next node %s", lostNode, got, hostOf(testkit.Rabbit4.AMQPURL))
	}
	testkit.Eventually(t, 20*time.Second, "the new connection listed by 4.0, none by 3.10", func() bool {
		return testkit.Rabbit4.CountConnections(t, name) == 1 && testkit.Rabbit3.CountConnections(t, name) == 0
	})
}

// TestLostConnectionIsNodeLost: classify names the node of a connection
// that was open and closed, as an engine.NodeLostError that is also
// ErrBrokerUnavailable.
func TestLostConnectionIsNodeLost(t *testing.T) {
	t.Parallel()
	b := testBroker(t, Config{})
	for _, cause := range []error{amqp.ErrClosed,
		&net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}, // a publish to a node just killed
		io.ErrUnexpectedEOF} {
		err := b.classify(cause)
		var lost *engine.NodeLostError
		if !errors.As(err, &lost) || !errors.Is(err, engine.ErrBrokerUnavailable) || lost.Node != hostOf(DefaultURL) {
			t.Errorf("classify(%v) = %v; want a NodeLostError for %s", cause, err, hostOf(DefaultURL))
		}
	}
	if err := b.classify(&amqp.Error{Code: amqp.PreconditionFailed, Reason: "x"}); errors.Is(err, engine.ErrBrokerUnavailable) {
		t.Errorf("a channel error classified as a lost node: %v", err)
	}
}

// TestManagementFailover: a node answering 503 is passed over for the next
// one, which then is asked first; the live node's answer is the queue's.
func TestManagementFailover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := e.queue("t-mgmt-failover", nil)
	e.publish(q, testMessages(2))
	e.waitReady(q, 2)
	var hits atomic.Int32
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "node is booting", http.StatusServiceUnavailable)
	}))
	defer sick.Close()
	u, _ := url.Parse(sick.URL)
	u.User = url.UserPassword("guest", "guest")
	b := testBroker(t, Config{ManagementURL: u.String() + "," + DefaultManagementURL})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// The live node's first sample of a new queue comes a statistics
	// interval or more after it (on a loaded 3.10, past 20 s; under make
	// test's load once not within 2 minutes). Each new kind of answer is
	// logged, so that a timeout says what the API gave.
	var last string
	testkit.Eventually(t, 3*time.Minute, "the live node's count of "+q, func() bool {
		s, err := b.QueueStats(ctx, q)
		if now := fmt.Sprintf("sampled %v, ready %d, err %v", s.Sampled, s.Ready, err); now != last {
			t.Logf("%s: %s", time.Now().Format(time.TimeOnly), now)
			last = now
		}
		return err == nil && s.Sampled && s.Ready == 2
	})
	before := hits.Load()
	if before == 0 {
		t.Fatal("the first node was never asked")
	}
	if _, err := b.QueueStats(ctx, q); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != before {
		t.Errorf("the failing node was asked again after the live one answered")
	}
}
