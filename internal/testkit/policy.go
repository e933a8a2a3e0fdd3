package testkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// SetPolicy applies (or replaces) policy name on b's vhost "/" through the
// management API, for queues matching pattern, and deletes it after the
// test.
func (b Broker) SetPolicy(t testing.TB, name, pattern string, definition map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"pattern": pattern, "apply-to": "queues", "priority": 10, "definition": definition,
	})
	if err := b.mgmt(http.MethodPut, "/api/policies/%2F/"+url.PathEscape(name), body); err != nil {
		t.Fatalf("testkit: set policy %s on %s: %v", name, b.Name, err)
	}
	t.Cleanup(func() { _ = b.mgmt(http.MethodDelete, "/api/policies/%2F/"+url.PathEscape(name), nil) })
}

// SetOperatorPolicy is SetPolicy for an operator policy.
func (b Broker) SetOperatorPolicy(t testing.TB, name, pattern string, definition map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"pattern": pattern, "apply-to": "queues", "priority": 10, "definition": definition,
	})
	if err := b.mgmt(http.MethodPut, "/api/operator-policies/%2F/"+url.PathEscape(name), body); err != nil {
		t.Fatalf("testkit: set operator policy %s on %s: %v", name, b.Name, err)
	}
	t.Cleanup(func() { _ = b.mgmt(http.MethodDelete, "/api/operator-policies/%2F/"+url.PathEscape(name), nil) })
}

// errNotFound is the management API's 404.
var errNotFound = errors.New("not found")

// mgmt sends one management API request to b.
func (b Broker) mgmt(method, path string, body []byte) error {
	u, err := url.Parse(b.ManagementURL)
	if err != nil {
		return err
	}
	user := u.User
	u.User = nil
	req, err := http.NewRequest(method, strings.TrimRight(u.String(), "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%s %s: %w", method, path, errNotFound)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return nil
}

// DeleteQueueHTTP deletes queue on b's vhost "/" through the management
// API, as an operator cleaning up would; it returns an error for a queue
// that does not exist.
func (b Broker) DeleteQueueHTTP(queue string) error {
	return b.mgmt(http.MethodDelete, "/api/queues/%2F/"+url.PathEscape(queue), nil)
}
