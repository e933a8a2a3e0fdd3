package engine_test

import (
	"testing"

	"github.com/stroma/dlqbot/internal/testkit"
)

// TestBrokerTestsRunInParallel: every test here that uses the brokers or
// Redis calls t.Parallel first, or one such test holds back all the others
// until it ends (testkit.RequireParallel).
func TestBrokerTestsRunInParallel(t *testing.T) {
	t.Parallel()
	testkit.RequireParallel(t, ".")
}
