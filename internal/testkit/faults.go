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
	return connections(t, b.ManagementURL, name, true)
}

// CountConnections is the package's CountConnections on broker b.
func (b Broker) CountConnections(t testing.TB, name string) int {
	t.Helper()
	return connections(t, b.ManagementURL, name, false)
}

func connections(t testing.TB, managementURL, name string, closeThem bool) int {
	t.Helper()
	base, err := url.Parse(managementURL)
	if err != nil {
		t.Fatal(err)
	}
	user := base.User
	base.User = nil
	req, _ := http.NewRequest(http.MethodGet, base.String()+"/api/connections?columns=name,client_properties", nil)
	pw, _ := user.Password()
	req.SetBasicAuth(user.Username(), pw)
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
	n := 0
	for _, c := range conns {
		if c.Props.Name != name {
			continue
		}
		if !closeThem {
			n++
			continue
		}
		del, _ := http.NewRequest(http.MethodDelete, base.String()+"/api/connections/"+url.PathEscape(c.Name), nil)
		del.SetBasicAuth(user.Username(), pw)
		del.Header.Set("X-Reason", "dlqbot fault test")
		r, err := http.DefaultClient.Do(del)
		if err != nil {
			t.Fatalf("testkit: close connection %s: %v", c.Name, err)
		}
		r.Body.Close()
		if r.StatusCode/100 != 2 {
			t.Fatalf("testkit: close connection %s: %s", c.Name, r.Status)
		}
		n++
	}
	return n
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
