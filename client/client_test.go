package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stroma/dlqbot/api"
)

// TestEventsAndRefusals: the event stream is read event by event (comments
// skipped, ids kept) until "end"; every call carries the bearer token and
// the program's label; a refusal is an *api.Error with the server's status
// and code, and an answer that is not the API's is code internal.
func TestEventsAndRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get(api.ClientHeader) != "terminal" {
			http.Error(w, "no", http.StatusTeapot)
			return
		}
		switch r.URL.Path {
		case "/api/v1/replays/r_1/events":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": keep-alive\n\n")
			fmt.Fprint(w, "event: replay\ndata: {\"replay_id\":\"r_1\",\"state\":\"queued\"}\n\n")
			fmt.Fprint(w, "id: 1-0\nevent: finished\ndata: {\"kind\":\"finished\",\"replay\":{\"replay_id\":\"r_1\",\"state\":\"finished\"}}\n\n")
			fmt.Fprint(w, "event: end\ndata: {\"replay_id\":\"r_1\",\"state\":\"finished\"}\n\n")
			fmt.Fprint(w, "event: after-end\ndata: {}\n\n")
		case "/api/v1/previews/p_1/approve":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"code":"needs_second_person","error":"Someone else has to approve. Nothing was done."}`)
		default:
			http.Error(w, "bad gateway", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	c := &Client{Base: srv.URL + "/", Token: "tok", Program: "terminal"}
	ctx := context.Background()

	var got []string
	err := c.Events(ctx, "r_1", func(e Event) bool {
		r, ok := e.Replay()
		got = append(got, fmt.Sprintf("%s/%s/%s/%v", e.ID, e.Kind, r.State, ok))
		return true
	})
	want := []string{"/replay/queued/true", "1-0/finished/finished/true", "/end//false"}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %q (%v), want %q", got, err, want)
	}

	_, err = c.Approve(ctx, "p_1", api.Params{}, "")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Code != api.CodeSecondPerson || ae.Message == "" {
		t.Fatalf("a refusal: %#v", err)
	}
	_, err = c.Replay(ctx, "r_2")
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || ae.Code != api.CodeInternal {
		t.Fatalf("a proxy's answer: %#v", err)
	}
	c.Token = "other"
	if _, err := c.Replay(ctx, "r_1"); !errors.As(err, &ae) || ae.Status != http.StatusTeapot {
		t.Fatalf("the token was not sent as a bearer token: %v", err)
	}
}
