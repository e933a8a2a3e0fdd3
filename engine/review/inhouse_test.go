package review

import (
	"errors"
	"github.com/stroma/dlqbot/engine/letter"
	"testing"
)

func TestServiceRefusesBadDialect(t *testing.T) {
	_, err := New(Config{Dialect: letter.HeaderDialect{Exception: "x"}}, Deps{})
	if !errors.Is(err, letter.ErrBadDialect) {
		t.Fatalf("New with a dialect without a source: %v", err)
	}
}
