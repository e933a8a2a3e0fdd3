package redact

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	var paths []Path
	for _, s := range []string{"$.card.number", "$.customer.email", "$.items[*].sku", `$["odd key"]`, "$.list[1]"} {
		p, err := ParsePath(s)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	body := `{"card":{"number":"4111111111111111","exp":"12/30"},"customer":{"email":"a@b.example","id":7},` +
		`"items":[{"sku":"S-1"},{"sku":"S-2","n":1}],"odd key":{"x":12345},"list":[1,2,3]}`
	out, hidden, err := JSON([]byte(body), paths)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"4111111111111111", "a@b.example", "S-1", "S-2", "12345"} {
		if strings.Contains(string(out), leak) {
			t.Errorf("%q left in %s", leak, out)
		}
		if !slices.Contains(hidden, leak) {
			t.Errorf("%q not among the hidden values %q", leak, hidden)
		}
	}
	for _, kept := range []string{`"exp":"12/30"`, `"id":7`, `"list":[1,"[redacted]",3]`} {
		if !strings.Contains(string(out), kept) {
			t.Errorf("%s lost from %s", kept, out)
		}
	}
	if _, _, err := JSON([]byte("card=4111111111111111"), paths); !errors.Is(err, ErrNotJSON) {
		t.Errorf("a body that is not JSON: %v", err)
	}
	if got := Values("card 4111111111111111 declined", hidden); strings.Contains(got, "4111") {
		t.Errorf("Values: %q", got)
	}
	for _, bad := range []string{"card.number", "$", "$.", "$[x]", "$[1", "$.a..b"} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("ParsePath(%q) accepted", bad)
		}
	}
}

func paths(t *testing.T, ss ...string) []Path {
	t.Helper()
	out := []Path{}
	for _, s := range ss {
		p, err := ParsePath(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestJSONShow: with an allowlist only the values at or under its paths
// are shown (a wildcard over an array, an index, a whole object); every
// other leaf — strings, numbers, booleans, null, nested deep — reads
// Hidden and its strings and numbers are returned as hidden; keys stay; a
// hide path under a shown one wins; an empty allowlist shows no value; a
// body that is not JSON is refused.
func TestJSONShow(t *testing.T) {
	body := `{"order_id":"O-77","items":[{"sku":"S-1","price":1999},{"sku":"S-2","email":"x@y.example"}],` +
		`"customer":{"name":"John Roe","email":"john.roe@example.com","vip":true,"note":null},` +
		`"ship":{"city":"Lyon","zip":"69001"},"tags":["kyc-failed","urgent"],"deep":{"a":{"b":[{"c":"secret-c"}]}}}`
	out, hidden, err := JSONShow([]byte(body), paths(t, "$.order_id", "$.items[*].sku", "$.ship", "$.tags[1]"), paths(t, "$.ship.zip"))
	if err != nil {
		t.Fatal(err)
	}
	for _, shown := range []string{`"order_id":"O-77"`, `"sku":"S-1"`, `"sku":"S-2"`, `"city":"Lyon"`, `"urgent"`} {
		if !strings.Contains(string(out), shown) {
			t.Errorf("%s not shown in %s", shown, out)
		}
	}
	for _, leak := range []string{"1999", "x@y.example", "John Roe", "john.roe@example.com", "true", "null", "69001", "kyc-failed", "secret-c"} {
		if strings.Contains(string(out), leak) {
			t.Errorf("%q left in %s", leak, out)
		}
	}
	for _, h := range []string{"1999", "x@y.example", "John Roe", "john.roe@example.com", "69001", "kyc-failed", "secret-c"} {
		if !slices.Contains(hidden, h) {
			t.Errorf("%q not among the hidden values %q", h, hidden)
		}
	}
	for _, s := range []string{"O-77", "S-1", "Lyon", "urgent", Hidden} {
		if slices.Contains(hidden, s) {
			t.Errorf("%q is among the hidden values %q", s, hidden)
		}
	}
	for _, key := range []string{`"customer":{"email":"[redacted]","name":"[redacted]","note":"[redacted]","vip":"[redacted]"}`, `"price":"[redacted]"`} {
		if !strings.Contains(string(out), key) {
			t.Errorf("%s not in %s", key, out)
		}
	}

	out, hidden, err = JSONShow([]byte(`{"a":"one","b":[2,"three"]}`), []Path{}, nil)
	if err != nil || string(out) != `{"a":"[redacted]","b":["[redacted]","[redacted]"]}` || len(hidden) != 3 {
		t.Errorf("an empty allowlist: %s %q %v", out, hidden, err)
	}
	if _, _, err := JSONShow([]byte("name=John Roe"), paths(t, "$.a"), nil); !errors.Is(err, ErrNotJSON) {
		t.Errorf("a body that is not JSON: %v", err)
	}
	if out, hidden, err := JSONShow([]byte("plain text"), nil, nil); err != nil || string(out) != "plain text" || hidden != nil {
		t.Errorf("no rules: %q %q %v", out, hidden, err)
	}
}
