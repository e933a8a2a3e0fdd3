package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPServerTimeoutsSet: serve's server has every timeout set.
func TestHTTPServerTimeoutsSet(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), httpTimeouts{})
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("timeouts: header %s read %s write %s idle %s", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
}

// TestHTTPServerCutsSlowClients: a client that sends its headers one byte
// at a time (slowloris), or its body slowly, is cut off by the server, and
// a client that sends at once is served.
func TestHTTPServerCutsSlowClients(t *testing.T) {
	t.Parallel()
	const header, read = 400 * time.Millisecond, 800 * time.Millisecond
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		_, _ = io.WriteString(w, "ok")
	}), httpTimeouts{ReadHeader: header, Read: read, Idle: time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	if c, body := get("http://" + addr + "/"); c != 200 || body != "ok" {
		t.Fatalf("a prompt client: %d %q", c, body)
	}
	// cutOff sends head at once, then slow a byte every 50ms for at most
	// 20s, and checks that the server closes the connection within.
	cutOff := func(name, head, slow string) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		start, req := time.Now(), slow
		for i := 0; time.Since(start) < 20*time.Second; i = (i + 1) % len(req) {
			if _, err := conn.Write([]byte{req[i]}); err != nil {
				break // the server closed the connection
			}
			// The server answers 408 or just closes: either ends the read.
			_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			if _, err := bufio.NewReader(conn).ReadByte(); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
			}
			break
		}
		took := time.Since(start)
		if took >= 20*time.Second {
			t.Fatalf("%s: still connected after %s", name, took)
		}
		t.Logf("%s: cut off after %s", name, took.Round(time.Millisecond))
	}
	cutOff("slow headers", "GET / HTTP/1.1\r\nHost: x\r\n", "X-Slow: "+strings.Repeat("a", 10000))
	cutOff("slow body", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", strings.Repeat("a", 100000))
}
