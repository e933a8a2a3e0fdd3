package store

import (
	"testing"
	"time"
)

// TestDashboardSignedOut: a signed-out session is recorded for every
// replica until it would have expired (Redis expires the key then);
// another session is not signed out.
func TestDashboardSignedOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ds := e.st.DashboardSessions()
	if out, err := ds.Revoked(e.ctx, "s1"); out || err != nil {
		t.Fatalf("before the sign-out: %v, %v", out, err)
	}
	if err := ds.Revoke(e.ctx, "s1", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if out, err := e.st.DashboardSessions().Revoked(e.ctx, "s1"); !out || err != nil {
		t.Fatalf("after the sign-out: %v, %v", out, err)
	}
	if out, err := ds.Revoked(e.ctx, "s2"); out || err != nil {
		t.Fatalf("another session: %v, %v", out, err)
	}
	if ttl := e.rdb.PTTL(e.ctx, e.st.b.k.dashboardSignedOut("s1")).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("the record expires in %s, want when the session would have (an hour)", ttl)
	}
	if err := ds.Revoke(e.ctx, "", time.Now().Add(time.Hour)); err == nil {
		t.Error("a session without an id was recorded")
	}
}
