package testkit

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// HangProxy is a TCP proxy on 127.0.0.1 (a random port) in front of
// another address: a broker's management API, say. Until Hang it passes
// every connection through; from Hang on it accepts new connections and
// never answers them, and it stops passing bytes on the connections it
// already carries (a management plugin that stopped responding). Resume
// passes new connections through again. It closes after the test.
type HangProxy struct {
	ln     net.Listener
	target string
	hang   atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	// Accepted counts the connections accepted while hanging.
	Accepted atomic.Int64
}

// NewHangProxy starts a proxy to target ("host:port").
func NewHangProxy(t testing.TB, target string) *HangProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testkit: hang proxy: listen: %v", err)
	}
	p := &HangProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// HangProxyFor starts a proxy in front of managementURL's host and returns
// it with managementURL rewritten to go through it (credentials kept).
func HangProxyFor(t testing.TB, managementURL string) (*HangProxy, string) {
	t.Helper()
	u, err := url.Parse(managementURL)
	if err != nil {
		t.Fatalf("testkit: hang proxy: %v", err)
	}
	p := NewHangProxy(t, u.Host)
	u.Host = p.Addr()
	return p, u.String()
}

// Addr is the proxy's "127.0.0.1:port".
func (p *HangProxy) Addr() string { return p.ln.Addr().String() }

// Hang makes the proxy accept and never answer.
func (p *HangProxy) Hang() { p.hang.Store(true) }

// Resume makes the proxy pass new connections through again.
func (p *HangProxy) Resume() { p.hang.Store(false) }

func (p *HangProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		if p.hang.Load() {
			p.Accepted.Add(1)
			continue // held open, never read, never answered
		}
		go p.pass(c)
	}
}

// pass copies c to and from the target while the proxy does not hang.
func (p *HangProxy) pass(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	go p.copy(up, c)
	p.copy(c, up)
}

// copy moves bytes from src to dst until either closes; once the proxy
// hangs, what it reads is dropped and the connection left open.
func (p *HangProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.hang.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = dst.Close()
			}
			if tc, ok := dst.(*net.TCPConn); ok && err == io.EOF {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

func (p *HangProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}
