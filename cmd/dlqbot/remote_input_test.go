package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestClientBadServerURL: a DLQBOT_SERVER that is not an http(s) base URL
// the client can put paths after — not a URL, another scheme, no host, a
// query, a fragment, credentials — is refused before anything is sent,
// exit 2, with a sentence naming DLQBOT_SERVER (and never repeating a
// password), by the terminal and by `dlqbot mcp` alike.
func TestClientBadServerURL(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	for _, bad := range []string{
		"dlqbot.internal:8080",
		"http://[::1",
		"ftp://dlqbot.internal",
		"http://",
		srv.URL + "/?x=1",
		srv.URL + "/#top",
		"http://user:s3cret-pass@" + strings.TrimPrefix(srv.URL, "http://"),
	} {
		env := clientEnv(bad, "some-token")
		for _, args := range [][]string{{"status", "--json"}, {"pause", "r_0123456789abcdef"}, {"mcp"}} {
			out, errw, code := dlqbot(t, env, args...)
			all := out + errw
			if code != exitUsage || !strings.Contains(all, "DLQBOT_SERVER") {
				t.Errorf("DLQBOT_SERVER=%q, dlqbot %v: exit %d %q, want 2 naming DLQBOT_SERVER", bad, args, code, all)
			}
			if strings.Contains(all, "s3cret-pass") {
				t.Errorf("DLQBOT_SERVER=%q: the password is repeated: %q", bad, all)
			}
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the server was called %d time(s) through a refused DLQBOT_SERVER", n)
	}
}

// TestClientNonJSONServer: a server that answers something other than the
// API's JSON (a proxy's sign-in page, another service at that address),
// with 200 or with an error status, is a clear failure, exit 1: the
// sentence says the answer is not the dlqbot API's and names the server,
// and --json still prints one document with a code.
func TestClientNonJSONServer(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusOK, http.StatusCreated, http.StatusBadGateway} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			_, _ = w.Write([]byte("<html><body>Please sign in</body></html>"))
		}))
		env := clientEnv(srv.URL, "some-token")
		for _, args := range [][]string{{"status", "r_0123456789abcdef", "--json"}, {"preview", "orders.dlq", "--json"}} {
			out, errw, code := dlqbot(t, env, args...)
			if code != exitFailed {
				t.Errorf("status %d, dlqbot %v: exit %d, want 1\n%s%s", status, args, code, out, errw)
				continue
			}
			doc := oneJSON(t, out)
			msg, _ := doc["error"].(string)
			if doc["code"] == nil || doc["code"] == "" || !strings.Contains(msg, "not") || !strings.Contains(msg, srv.URL) {
				t.Errorf("status %d, dlqbot %v: %v, want a code and a sentence naming %s", status, args, doc, srv.URL)
			}
		}
		srv.Close()
	}
}
