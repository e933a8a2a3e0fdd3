package engine

import (
	"encoding/json"
	"testing"
)

func TestReplayVerdict(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Replay
		want ReplayVerdict
	}{
		{"finished clean", Replay{State: StateFinished, Sent: 400, Settled: 400}, VerdictClean},
		{"finished with returns", Replay{State: StateFinished, Sent: 32, Settled: 32, Returned: 12}, VerdictCameBack},
		{"stopped with returns", Replay{State: StateStopped, Sent: 10, Settled: 10, Returned: 3}, VerdictCameBack},
		{"unseen window", Replay{State: StateFinished, Sent: 10, Settled: 10, Unseen: &Unseen{Count: 4}}, VerdictCouldNotTell},
		{"in doubt", Replay{State: StateFinished, Sent: 10, Settled: 10, InDoubt: 1}, VerdictCouldNotTell},
		{"finished unsettled", Replay{State: StateFinished, Sent: 10, Settled: 7}, VerdictCouldNotTell},
		{"stopped could not tell", Replay{State: StateStopped, Sent: 10, Settled: 10, Note: "stopped: engine: run r: the read could not tell whether every copy stayed away"}, VerdictCouldNotTell},
		{"running unsettled so far", Replay{State: StateRunning, Sent: 10, Settled: 3}, VerdictClean},
		{"paused unsettled so far", Replay{State: StatePaused, Sent: 10, Settled: 3}, VerdictClean},
		{"stopped on a settle timeout", Replay{State: StateStopped, Sent: 10, Settled: 4}, VerdictCouldNotTell},
		{"cancelled clean", Replay{State: StateCancelled, Sent: 20, Settled: 20}, VerdictClean},
	} {
		if got := c.r.Verdict(); got != c.want {
			t.Errorf("%s: verdict %q, want %q", c.name, got, c.want)
		}
	}
}

func TestReplayJSONCarriesVerdict(t *testing.T) {
	r := Replay{ID: "r_1", State: StateFinished, Sent: 32, Settled: 32, Returned: 12}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["verdict"] != "came_back" || doc["state"] != "finished" || doc["replay_id"] != "r_1" {
		t.Fatalf("document %s: want verdict came_back beside state finished", data)
	}
	var back Replay
	if err := json.Unmarshal(data, &back); err != nil || back.Returned != 12 || back.ID != "r_1" {
		t.Fatalf("read back %+v, %v", back, err)
	}
	var uv map[string]any
	data, _ = json.Marshal(Replay{ID: "r_2", Unverifiable: true})
	_ = json.Unmarshal(data, &uv)
	if _, ok := uv["verdict"]; ok {
		t.Fatalf("unverifiable record %s carries a verdict", data)
	}
}
