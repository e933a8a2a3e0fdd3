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
