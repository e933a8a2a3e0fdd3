package testkit

import "testing"

// TestClassicOnPicksOneBrokerStably checks that a classic case runs on one
// broker, the same for the same test whatever its subtest path, that the
// long fault tests spread over all three, that the quorum case runs on
// another one (QuorumOn), and that DLQBOT_CLASSIC_ALL=1 gives every broker.
func TestClassicOnPicksOneBrokerStably(t *testing.T) {
	t.Setenv("DLQBOT_CLASSIC_ALL", "")
	t.Setenv("DLQBOT_RABBIT4", "")
	seen := map[string]bool{}
	for _, name := range []string{"TestConnectionsClosedMidReplayLoseNothing", "TestUnpacedReplayConnectionLostEnds",
		"TestResendInDoubtAfterThreeConnectionLosses", "TestPacedReplayGoesOnAfterLosingItsConnection"} {
		bs := ClassicOn(name)
		if len(bs) != 1 {
			t.Fatalf("%s: %d brokers, want 1", name, len(bs))
		}
		if again := ClassicOn(name + "/classic"); len(again) != 1 || again[0].Name != bs[0].Name {
			t.Fatalf("%s: %s, but %v for its subtest", name, bs[0].Name, again)
		}
		seen[bs[0].Name] = true
		if q := QuorumOn(name + "/quorum"); len(q) != 1 || q[0].Name == bs[0].Name {
			t.Fatalf("%s: quorum on %v, classic on %s: want one other broker", name, q, bs[0].Name)
		}
	}
	if len(seen) != 3 {
		t.Errorf("the fault tests' classic cases run on %v, want all three brokers between them", seen)
	}
	t.Setenv("DLQBOT_CLASSIC_ALL", "1")
	if bs := ClassicOn("TestUnpacedReplayConnectionLostEnds"); len(bs) != 3 {
		t.Errorf("with DLQBOT_CLASSIC_ALL=1: %d brokers, want 3", len(bs))
	}
	if bs := QuorumOn("TestUnpacedReplayConnectionLostEnds"); len(bs) != 3 {
		t.Errorf("QuorumOn with DLQBOT_CLASSIC_ALL=1: %d brokers, want 3", len(bs))
	}
	if cs := Matrix("classic", "quorum"); len(cs) != 6 {
		t.Errorf("Matrix with DLQBOT_CLASSIC_ALL=1: %d cases, want 6", len(cs))
	}
}
