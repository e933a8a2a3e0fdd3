package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/ops"
	"github.com/stroma/dlqbot/redact"
)

// Header is the request header that names the program making a call
// ("terminal", "mcp"). The server records it in the audit trail as the
// call's front end; it decides nothing (the bearer token's principal
// does).
const Header = api.ClientHeader

// ErrUnreachable wraps a call that got no answer from the server.
var ErrUnreachable = errors.New("the dlqbot server cannot be reached")

// Client calls one dlqbot server as one principal.
type Client struct {
	// Base is the server's base URL ("http://dlqbot.internal:8080"),
	// without /api/v1.
	Base string
	// Token is the principal's bearer token.
	Token string
	// Program is sent in Header ("terminal", "mcp"); "" sends none.
	Program string
	// HTTP is the client used; nil means one with no overall timeout (an
	// event stream lasts as long as its replay), whose dials and response
	// headers time out after 30s and 10 minutes.
	HTTP *http.Client
}

var defaultHTTP = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
	ResponseHeaderTimeout: 10 * time.Minute,
	TLSHandshakeTimeout:   30 * time.Second,
	IdleConnTimeout:       90 * time.Second,
}}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

// do sends one request: body (nil for none) as JSON, and decodes a 2xx
// answer into out (nil to drop it). Any other status is an *api.Error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, query, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return &api.Error{Status: resp.StatusCode, Code: api.CodeInternal, Message: fmt.Sprintf(
			"The server at %s answered %s to %s %s, but not with the dlqbot API's JSON (a proxy's page, or another service at that address?): check DLQBOT_SERVER. Whether it acted is unknown; dlqbot status shows what happened.",
			redact.URL(c.Base), resp.Status, method, path)}
	}
	return nil
}

// send sends a request and returns a 2xx response (its body for the
// caller to close), or the answer as an *api.Error.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(data)
	}
	u := strings.TrimRight(c.Base, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", accept)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Program != "" {
		req.Header.Set(Header, c.Program)
	}
	resp, err := c.http().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, redact.URL(c.Base), errors.Unwrap(err))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, answerError(resp, c.Base)
}

// answerError reads a refusal or failure: the API's {code, error} body
// with the response's status; a body that is not one (a proxy's page)
// becomes code "internal" naming the status.
func answerError(resp *http.Response, base string) error {
	e := &api.Error{Status: resp.StatusCode}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(data, e) != nil || e.Code == "" {
		e.Code, e.Message = api.CodeInternal, fmt.Sprintf(
			"The server at %s answered %s, not with the dlqbot API's JSON (a proxy's page, or another service at that address?): check DLQBOT_SERVER.",
			redact.URL(base), resp.Status)
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		var n int
		if _, err := fmt.Sscan(s, &n); err == nil {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	return e
}

// Preview previews selection, in the grammar of `/dlq preview`.
func (c *Client) Preview(ctx context.Context, selection string) (*engine.Preview, error) {
	var p engine.Preview
	if err := c.do(ctx, "POST", "/api/v1/previews", nil, map[string]string{"selection": selection}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Approve approves a preview's token; confirm is the changes_digest of an
// earlier "changed" refusal, or "".
func (c *Client) Approve(ctx context.Context, token string, p api.Params, confirm string) (engine.Replay, error) {
	body := struct {
		api.Params
		ConfirmChanges string `json:"confirm_changes,omitempty"`
	}{p, confirm}
	var r engine.Replay
	err := c.do(ctx, "POST", "/api/v1/previews/"+url.PathEscape(token)+"/approve", nil, body, &r)
	return r, err
}

// RequestApproval asks a person in Slack to approve a preview's token
// instead of approving it; the answer says where the preview was posted.
func (c *Client) RequestApproval(ctx context.Context, token string) (api.ApprovalRequest, error) {
	var out api.ApprovalRequest
	err := c.do(ctx, "POST", "/api/v1/previews/"+url.PathEscape(token)+"/request-approval", nil, nil, &out)
	return out, err
}

// Replay returns one replay.
func (c *Client) Replay(ctx context.Context, id string) (engine.Replay, error) {
	var r engine.Replay
	err := c.do(ctx, "GET", "/api/v1/replays/"+url.PathEscape(id), nil, nil, &r)
	return r, err
}

// List returns the n most recent replays the principal may see (n <= 0:
// the server's default) and how many others were hidden.
func (c *Client) List(ctx context.Context, n int) ([]engine.Replay, int, error) {
	q := url.Values{}
	if n > 0 {
		q.Set("limit", fmt.Sprint(n))
	}
	var out struct {
		Replays []engine.Replay `json:"replays"`
		Hidden  int             `json:"hidden"`
	}
	err := c.do(ctx, "GET", "/api/v1/replays", q, nil, &out)
	return out.Replays, out.Hidden, err
}

// DLQs lists the dead-letter queues the token's principal may read
// (GET /api/v1/dlqs).
func (c *Client) DLQs(ctx context.Context) (ops.DLQs, error) {
	var out ops.DLQs
	err := c.do(ctx, "GET", "/api/v1/dlqs", nil, nil, &out)
	if out.DLQs == nil {
		out.DLQs = []ops.DLQ{}
	}
	return out, err
}

// Control pauses, resumes or cancels a replay (engine.ControlAction, the
// resume that resends in-doubt copies included).
func (c *Client) Control(ctx context.Context, action engine.ControlAction, id string) (engine.Replay, error) {
	var body any
	if action == engine.ControlResumeResend {
		body = map[string]string{"resend": engine.ResendInDoubt}
	}
	var r engine.Replay
	err := c.do(ctx, "POST", "/api/v1/replays/"+url.PathEscape(id)+"/"+string(action.Verb()), nil, body, &r)
	return r, err
}

// Check reports whether a replay's copies came back.
func (c *Client) Check(ctx context.Context, id string) (engine.CheckReport, error) {
	var rep engine.CheckReport
	err := c.do(ctx, "POST", "/api/v1/replays/"+url.PathEscape(id)+"/check", nil, nil, &rep)
	return rep, err
}

// Park moves a replay's returned copies at the park limit to the DLQ's
// parking queue.
func (c *Client) Park(ctx context.Context, id string) (engine.ParkResult, error) {
	var res engine.ParkResult
	err := c.do(ctx, "POST", "/api/v1/replays/"+url.PathEscape(id)+"/park", nil, nil, &res)
	return res, err
}

// Audit returns the audit entries that filter (the query parameters of
// GET /api/v1/audit) selects and the principal may see, oldest first.
func (c *Client) Audit(ctx context.Context, filter url.Values) ([]audit.Entry, error) {
	resp, err := c.send(ctx, "GET", "/api/v1/audit", filter, nil, "application/x-ndjson")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []audit.Entry
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e audit.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, fmt.Errorf("client: audit: a line is not an entry: %w", err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("client: audit: %w", err)
	}
	return out, nil
}
