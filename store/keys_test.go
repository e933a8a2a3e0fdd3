package store

import (
	"strings"
	"testing"
)

// hashTag returns what Redis Cluster hashes for key: the first non-empty
// {…} group, or the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

func TestKeysShareSlots(t *testing.T) {
	t.Parallel()
	k := keys{p: DefaultPrefix}
	for _, key := range []string{k.replay("r_abc"), k.lease("r_abc"), k.ledger("r_abc")} {
		if !strings.HasPrefix(key, "dlqbot:{r_abc}:") || hashTag(key) != "r_abc" {
			t.Errorf("replay key %q hashes %q", key, hashTag(key))
		}
	}
	for _, key := range []string{k.token("p_tok"), k.tokenUsed("p_tok")} {
		if hashTag(key) != "p_tok" {
			t.Errorf("token key %q hashes %q", key, hashTag(key))
		}
	}
	for _, key := range []string{k.replays(), k.schedule(), k.workers(), k.jobs(), k.sent("orders.dlq")} {
		if !strings.HasPrefix(key, "dlqbot:") || strings.ContainsAny(key, "{}") {
			t.Errorf("global key %q", key)
		}
	}
	for _, bad := range []string{"", "a{b", "a}b", "a b", strings.Repeat("x", maxIDLen+1)} {
		if checkTag("id", bad) == nil {
			t.Errorf("checkTag accepted %q", bad)
		}
	}
}
