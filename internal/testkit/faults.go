package testkit

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// CloseConnections closes, through the management API of RabbitMQ 3.10,
// every broker connection whose client-provided name is name, and returns
// how many it closed. Other tests' connections are left alone.
func CloseConnections(t testing.TB, name string) int {
	t.Helper()
	return Rabbit3.CloseConnections(t, name)
}

// CountConnections returns how many connections named name the management
// API of RabbitMQ 3.10 lists (it learns of a new connection within a
// statistics interval).
func CountConnections(t testing.TB, name string) int {
	t.Helper()
	return Rabbit3.CountConnections(t, name)
}

// CloseConnections is the package's CloseConnections on broker b.
func (b Broker) CloseConnections(t testing.TB, name string) int {
	t.Helper()
	return b.CloseNamed(t, b.ConnectionNames(t, name))
}

// CountConnections is the package's CountConnections on broker b.
func (b Broker) CountConnections(t testing.TB, name string) int {
	t.Helper()
	return len(b.ConnectionNames(t, name))
}

// ConnectionNames returns the management API's names of the connections
// whose client-provided name is name, so that a test can later close them
// with one request each (CloseNamed), without listing again.
func (b Broker) ConnectionNames(t testing.TB, name string) []string {
	t.Helper()
	base, user, pw := mgmtBase(t, b.ManagementURL)
	req, _ := http.NewRequest(http.MethodGet, base+"/api/connections?columns=name,client_properties", nil)
	req.SetBasicAuth(user, pw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("testkit: list connections: %v", err)
	}
	defer resp.Body.Close()
	var conns []struct {
		Name  string `json:"name"`
		Props struct {
			Name string `json:"connection_name"`
		} `json:"client_properties"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&conns); err != nil {
		t.Fatalf("testkit: decode connections: %v", err)
	}
	var names []string
	for _, c := range conns {
		if c.Props.Name == name {
			names = append(names, c.Name)
		}
	}
	return names
}

// CloseNamed closes the connections the management API names names (see
// ConnectionNames) and returns how many it closed; one already gone is
// not counted.
func (b Broker) CloseNamed(t testing.TB, names []string) int {
	t.Helper()
	base, user, pw := mgmtBase(t, b.ManagementURL)
	n := 0
	for _, c := range names {
		// Closing is idempotent (a connection gone answers 404), so a
		// request whose answer was lost (EOF: a pooled HTTP connection the
		// broker had closed) is sent again; a 404 then may be the first
		// request's work, and counts as closed.
		var r *http.Response
		var err error
		lost := false
		for try := 0; try < 3; try++ {
			del, _ := http.NewRequest(http.MethodDelete, base+"/api/connections/"+url.PathEscape(c), nil)
			del.SetBasicAuth(user, pw)
			del.Header.Set("X-Reason", "dlqbot fault test")
			if r, err = http.DefaultClient.Do(del); err == nil {
				break
			}
			lost = true
		}
		if err != nil {
			t.Fatalf("testkit: close connection %s: %v", c, err)
		}
		r.Body.Close()
		if r.StatusCode == http.StatusNotFound {
			if lost {
				n++
			}
			continue
		}
		if r.StatusCode/100 != 2 {
			t.Fatalf("testkit: close connection %s: %s", c, r.Status)
		}
		n++
	}
	return n
}

// mgmtBase splits a management URL into its address and credentials.
func mgmtBase(t testing.TB, managementURL string) (base, user, pw string) {
	t.Helper()
	u, err := url.Parse(managementURL)
	if err != nil {
		t.Fatal(err)
	}
	user = u.User.Username()
	pw, _ = u.User.Password()
	u.User = nil
	return u.String(), user, pw
}

// NoneLost checks that every original message id is in the DLQ or was
// delivered from the target, and returns the ids seen more than once
// (duplicates) with how many extra copies each has.
func NoneLost(originals []string, delivered, inDLQ map[string]int) (lost []string, dups map[string]int) {
	dups = map[string]int{}
	for _, id := range originals {
		n := delivered[id] + inDLQ[id]
		switch {
		case n == 0:
			lost = append(lost, id)
		case n > 1:
			dups[id] = n - 1
		}
	}
	return lost, dups
}

// Describe summarises a NoneLost result for a failure message.
func Describe(lost []string, dups map[string]int) string {
	return fmt.Sprintf("%d lost %v, %d duplicated", len(lost), lost, len(dups))
}
