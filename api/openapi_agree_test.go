package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/commands"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
)

// badSignature is a record refused by its signature check, as the
// store reports one (store.SignatureError).
type badSignature struct{}

func (badSignature) Error() string            { return "store: replay r_probe: bad signature" }
func (badSignature) Unwrap() error            { return engine.ErrBadSignature }
func (badSignature) Record() (string, string) { return "replay", "r_probe" }

// probeEngine stands in for the operations' engine, tokens, replays,
// windows and the event log in the agreement test (which is about the
// HTTP layer; the real engine and store are tested against RabbitMQ and
// Redis): fail, when set, is returned by every call; full makes the scan
// limit refuse; refusal is returned by the state-changing calls only;
// noTrail serves without an audit trail; slackDown makes asking a person
// in Slack fail.
type probeEngine struct {
	fail      error
	refusal   error
	full      bool
	noTrail   bool
	slackDown bool
}

// RequestApproval and ApprovalChannel are the Slack front end that asks a
// person (ops.Asker).
func (p *probeEngine) RequestApproval(context.Context, engine.Frozen, *engine.Preview) (string, string, error) {
	if p.slackDown {
		return "", "", errors.New("slack: connection refused")
	}
	return "C0API", "1.000100", nil
}
func (p *probeEngine) ApprovalChannel() string { return "C0API" }

func (p *probeEngine) err() error { return p.fail }

func (p *probeEngine) Preview(_ context.Context, sel engine.Selection, req string) (*engine.Preview, error) {
	if err := p.err(); err != nil {
		return nil, err
	}
	return &engine.Preview{Token: "p_probe", DLQ: engine.QueueInfo{Name: sel.DLQ}, Requester: req}, nil
}
func (p *probeEngine) Compare(context.Context, string) (engine.Frozen, []engine.Change, error) {
	return engine.Frozen{}, nil, p.err()
}
func (p *probeEngine) ApproveConfirmed(_ context.Context, token, by, _ string, _ engine.Params, _ string) (engine.Approval, error) {
	if err := cmpOr(p.err(), p.refusal); err != nil {
		return engine.Approval{}, err
	}
	return engine.Approval{Replay: engine.Replay{ID: "r_probe", Token: token, DLQ: "q", Approver: by}}, nil
}
func (p *probeEngine) Control(_ context.Context, id string, _ engine.ControlAction, _ string) (engine.Replay, error) {
	if err := cmpOr(p.err(), p.refusal); err != nil {
		return engine.Replay{}, err
	}
	return engine.Replay{ID: id, DLQ: "q", Token: "p_probe"}, nil
}
func (p *probeEngine) Enqueue(context.Context, string) error { return p.err() }
func (p *probeEngine) Status(_ context.Context, id string) (engine.Replay, error) {
	return engine.Replay{ID: id, DLQ: "q", Token: "p_probe", State: engine.StateFinished}, p.err()
}
func (p *probeEngine) Check(_ context.Context, id, _ string) (engine.CheckReport, error) {
	return engine.CheckReport{}, p.err()
}
func (p *probeEngine) Park(context.Context, string, string) (engine.ParkResult, error) {
	return engine.ParkResult{}, cmpOr(p.err(), p.refusal)
}
func (p *probeEngine) LoadHeader(ctx context.Context, token string) (engine.Frozen, error) {
	return p.Load(ctx, token)
}

func (p *probeEngine) Load(_ context.Context, token string) (engine.Frozen, error) {
	return engine.Frozen{Token: token, DLQ: "q", Requester: "api:other", Total: 1}, p.err()
}
func (p *probeEngine) Discard(context.Context, string) error { return p.err() }
func (p *probeEngine) List(context.Context, int) ([]engine.Replay, error) {
	return []engine.Replay{{ID: "r_probe", DLQ: "q"}}, p.err()
}
func (p *probeEngine) Take(context.Context, string, int, int, time.Duration) (ops.Take, error) {
	return ops.Take{OK: !p.full, RetryAfter: time.Minute}, p.err()
}
func (p *probeEngine) Give(context.Context, string, string) error { return nil }
func (p *probeEngine) ListQueues(context.Context) ([]engine.QueueListing, error) {
	return []engine.QueueListing{{Name: "q.dlq", Messages: 3}}, p.err()
}

// Append and Read are the event log: one final event.
func (p *probeEngine) Append(context.Context, engine.Event) error { return nil }
func (p *probeEngine) Read(_ context.Context, id, after string, _ int) ([]string, []engine.Event, error) {
	if after != "" {
		return nil, nil, nil
	}
	return []string{"1-0"}, []engine.Event{{Kind: engine.EventFinished, Replay: engine.Replay{ID: id, State: engine.StateFinished}}}, nil
}

// probeTrail is the audit trail the export reads: one entry of a DLQ
// every principal may read, or probeEngine's failure.
type probeTrail struct{ pe *probeEngine }

func (p probeTrail) List(_ context.Context, f audit.Filter) ([]audit.Entry, error) {
	if f.After != "" {
		return nil, p.pe.err()
	}
	return []audit.Entry{{ID: "1-0", Time: time.Unix(1, 0).UTC(), Principal: "all", Identity: "api:all", FrontEnd: ops.FrontAPI,
		Op: audit.OpPreview, Outcome: audit.OutcomeOK, DLQ: "q"}}, p.pe.err()
}

func cmpOr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

const (
	probeAll      = "probe-all-0123456789"
	probeViewer   = "probe-viewer-0123456789"
	probeStranger = "probe-stranger-0123456789"
	probeAgent    = "probe-agent-0123456789"
)

// probeService is the API on probeEngine with four principals.
func probeService(t *testing.T, pe *probeEngine, withPolicy, withEvents bool) http.Handler {
	t.Helper()
	var policy *commands.Policy
	if withPolicy {
		var err error
		policy, err = commands.ParsePolicy([]byte(`principals:
  - {name: all, token_sha256: ` + commands.HashToken(probeAll) + `}
  - {name: viewer, token_sha256: ` + commands.HashToken(probeViewer) + `}
  - {name: stranger, token_sha256: ` + commands.HashToken(probeStranger) + `}
  - {name: agent, token_sha256: ` + commands.HashToken(probeAgent) + `, needs_human: true}
roles:
  - name: all
    principals: [all, agent]
    grants: [{queues: ["*"], actions: [read, replay, publish]}]
  - name: viewer
    principals: [viewer]
    grants: [{queues: ["*"], actions: [read]}]
`))
		if err != nil {
			t.Fatal(err)
		}
	}
	o, err := ops.New(ops.Config{Policy: policy}, ops.Deps{Engine: pe, Tokens: pe, Replays: pe, Windows: pe, Queues: pe, Asker: pe, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	d := Deps{Ops: o, Log: zerolog.Nop()}
	if withEvents {
		d.Events = pe
	}
	if !pe.noTrail {
		d.AuditLog = probeTrail{pe}
	}
	s, err := New(Config{EventPoll: time.Millisecond}, d)
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler()
}

// probe is one request under one engine behaviour.
type probe struct {
	name          string
	engine        probeEngine
	token         string
	body          string // "" sends none
	query         string
	policy, event bool
}

// probes returns the requests every operation is tried with, and the
// operation-specific ones.
func probes(method, path string) []probe {
	ps := []probe{
		{name: "ok", token: probeAll, policy: true, event: true},
		{name: "no token", policy: true, event: true},
		{name: "api off", token: probeAll, event: true},
		{name: "stranger", token: probeStranger, policy: true, event: true},
		{name: "redis down", engine: probeEngine{fail: fmt.Errorf("x: %w", engine.ErrStoreUnavailable)}, token: probeAll, policy: true, event: true},
		{name: "timeout", engine: probeEngine{fail: context.DeadlineExceeded}, token: probeAll, policy: true, event: true},
		{name: "broken", engine: probeEngine{fail: errors.New("boom")}, token: probeAll, policy: true, event: true},
	}
	notFound := engine.ErrReplayNotFound
	if strings.HasPrefix(path, "/api/v1/previews") {
		notFound = engine.ErrTokenNotFound
		if path == "/api/v1/previews" {
			notFound = engine.ErrQueueNotFound
		}
	}
	if path != "/api/v1/replays" && path != "/api/v1/audit" && path != "/api/v1/dlqs" {
		ps = append(ps, probe{name: "not found", engine: probeEngine{fail: notFound}, token: probeAll, policy: true, event: true})
	}
	if path != "/api/v1/audit" && path != "/api/v1/previews" && path != "/api/v1/dlqs" {
		// A record in Redis (a token, a replay) that fails its signature
		// check: 409 bad_signature wherever one is read.
		ps = append(ps, probe{name: "bad signature", engine: probeEngine{fail: badSignature{}}, token: probeAll, policy: true, event: true})
	}
	if method == "POST" {
		ps = append(ps,
			probe{name: "bad json", token: probeAll, body: "{", policy: true},
			probe{name: "too large", token: probeAll, body: `{"selection":"` + strings.Repeat("a", DefaultMaxBodyBytes) + `"}`, policy: true})
	}
	switch {
	case path == "/api/v1/previews":
		ps = append(ps, probe{name: "rate limited", engine: probeEngine{full: true}, token: probeAll, policy: true},
			probe{name: "empty selection", token: probeAll, body: `{"selection":""}`, policy: true})
	case strings.HasSuffix(path, "/approve"):
		ps = append(ps, probe{name: "used", engine: probeEngine{refusal: engine.ErrTokenUsed}, token: probeAll, policy: true},
			probe{name: "needs a human", token: probeAgent, policy: true},
			probe{name: "step 0", token: probeAll, body: `{"step":0}`, policy: true})
	case strings.HasSuffix(path, "/request-approval"):
		ps = append(ps, probe{name: "slack down", engine: probeEngine{slackDown: true}, token: probeAll, policy: true})
	case strings.HasSuffix(path, "/check"):
		ps = append(ps, probe{name: "rate limited", engine: probeEngine{full: true}, token: probeAll, policy: true})
	case strings.HasSuffix(path, "/pause"), strings.HasSuffix(path, "/resume"), strings.HasSuffix(path, "/cancel"):
		ps = append(ps, probe{name: "not controllable", engine: probeEngine{refusal: fmt.Errorf("x: %w", engine.ErrNotControllable)}, token: probeAll, policy: true})
	case path == "/api/v1/replays":
		ps = append(ps, probe{name: "limit 0", token: probeAll, query: "limit=0", policy: true})
	case path == "/api/v1/audit":
		ps = append(ps, probe{name: "no trail", engine: probeEngine{noTrail: true}, token: probeAll, policy: true},
			probe{name: "unknown filter", token: probeAll, query: "colour=red", policy: true},
			probe{name: "viewer", token: probeViewer, query: "op=preview&since=2h", policy: true})
	case strings.HasSuffix(path, "/events"):
		ps = append(ps, probe{name: "no event log", token: probeAll, policy: true, event: false})
	}
	for i := range ps {
		if ps[i].body == "" && method == "POST" && path == "/api/v1/previews" {
			ps[i].body = `{"selection":"q"}`
		}
	}
	return ps
}

// TestOpenAPIAgreesWithTheServer walks api/openapi.yaml: for every
// operation it sends the probes above to the real handler (on fake
// ports) and checks that the set of statuses the server answered is
// exactly the set the file documents — no undocumented status (413, 429,
// 500, 504 …), no documented one the server never gives. Then every
// documented minimum and maximum of a parameter or body property is
// tried on both sides of the bound: outside answers 400, inside does not.
func TestOpenAPIAgreesWithTheServer(t *testing.T) {
	data, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string         `yaml:"name"`
				In     string         `yaml:"in"`
				Schema map[string]any `yaml:"schema"`
			} `yaml:"parameters"`
			RequestBody struct {
				Content map[string]struct {
					Schema struct {
						Properties map[string]map[string]any `yaml:"properties"`
					} `yaml:"schema"`
				} `yaml:"content"`
			} `yaml:"requestBody"`
			Responses map[string]any `yaml:"responses"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	concrete := func(path string) string {
		return strings.NewReplacer("{token}", "p_probe", "{id}", "r_probe").Replace(path)
	}
	send := func(p probe, method, path, body string, query string) int {
		pe := p.engine
		h := probeService(t, &pe, p.policy, p.event)
		url := concrete(path)
		if query != "" {
			url += "?" + query
		}
		var req *http.Request
		if body != "" {
			req = httptest.NewRequest(method, url, strings.NewReader(body))
		} else {
			req = httptest.NewRequest(method, url, nil)
		}
		if p.token != "" {
			req.Header.Set("Authorization", "Bearer "+p.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for path, methods := range doc.Paths {
		for method, op := range methods {
			method = strings.ToUpper(method)
			var documented []string
			for code := range op.Responses {
				documented = append(documented, code)
			}
			seen := map[string]string{}
			for _, p := range probes(method, path) {
				code := strconv.Itoa(send(p, method, path, p.body, p.query))
				if _, ok := seen[code]; !ok {
					seen[code] = p.name
				}
			}
			var observed []string
			for code, name := range seen {
				observed = append(observed, code)
				if !slices.Contains(documented, code) {
					t.Errorf("%s %s answers %s (%s) but openapi.yaml does not document it", method, path, code, name)
				}
			}
			for _, code := range documented {
				if _, ok := seen[code]; !ok {
					t.Errorf("%s %s documents %s, which no probe provoked", method, path, code)
				}
			}
			sort.Strings(observed)
			t.Logf("%s %s: %v", method, path, observed)

			// Bounds: query parameters and JSON body properties.
			ok := probe{token: probeAll, policy: true, event: true}
			for _, prm := range op.Parameters {
				if prm.In != "query" {
					continue
				}
				for _, b := range bounds(prm.Schema) {
					got := send(ok, method, path, "", prm.Name+"="+strconv.Itoa(b.value))
					if (got == http.StatusBadRequest) != b.outside {
						t.Errorf("%s %s ?%s=%d: status %d (outside the documented bounds: %v)", method, path, prm.Name, b.value, got, b.outside)
					}
				}
			}
			for _, c := range op.RequestBody.Content {
				for name, schema := range c.Schema.Properties {
					for _, b := range bounds(schema) {
						body := fmt.Sprintf(`{%q:%d}`, name, b.value)
						if name == "cap" { // a cap is at least the first step: give both
							body = fmt.Sprintf(`{"cap":%d,"step":%d}`, b.value, b.value)
						}
						got := send(ok, method, path, body, "")
						if (got == http.StatusBadRequest) != b.outside {
							t.Errorf("%s %s {%q: %d}: status %d (outside the documented bounds: %v)", method, path, name, b.value, got, b.outside)
						}
					}
				}
			}
		}
	}
}

type bound struct {
	value   int
	outside bool
}

// bounds returns values on both sides of a schema's minimum and maximum.
func bounds(schema map[string]any) []bound {
	var out []bound
	if v, ok := schema["minimum"].(int); ok {
		out = append(out, bound{v - 1, true}, bound{v, false})
	}
	if v, ok := schema["maximum"].(int); ok {
		out = append(out, bound{v + 1, true}, bound{v, false})
	}
	return out
}
