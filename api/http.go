package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/engine"
	"github.com/stroma/dlqbot/redact"
)

// handler serves the HTTP API.
type handler struct {
	s   *Service
	mux *http.ServeMux
}

// endpoint is one API call: it returns the response body (nil for none)
// and a success status, or an *Error.
type endpoint func(w http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error)

// Handler serves the JSON HTTP API under /api/v1/. Each call needs a
// bearer token of a principal in the permissions file (401 otherwise);
// without a permissions file every call is answered 404, code
// api_disabled. Every call is logged with its principal. Mount it with
// mux.Handle("/api/", s.Handler()).
func (s *Service) Handler() http.Handler {
	h := &handler{s: s, mux: http.NewServeMux()}
	for _, rt := range h.routes() {
		fn, stream := rt.fn, rt.stream
		h.mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, fn, stream) })
	}
	h.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r, func(http.ResponseWriter, *http.Request, Caller) (any, int, *Error) {
			return nil, 0, newError(http.StatusNotFound, CodeNotFound, "There is no %s %s in the API; see api/openapi.yaml.", r.Method, r.URL.Path)
		}, false)
	})
	return h.mux
}

// route is one endpoint of the API (api/openapi.yaml documents each).
type route struct {
	method, path string
	fn           endpoint
	// stream marks a long-lived response (the event stream), which is not
	// bounded by WorkTimeout.
	stream bool
}

func (h *handler) routes() []route {
	return []route{
		{"POST", "/api/v1/previews", h.createPreview, false},
		{"POST", "/api/v1/previews/{token}/approve", h.approve, false},
		{"GET", "/api/v1/dlqs", h.listDLQs, false},
		{"POST", "/api/v1/previews/{token}/request-approval", h.requestApproval, false},
		{"GET", "/api/v1/replays", h.listReplays, false},
		{"GET", "/api/v1/replays/{id}", h.getReplay, false},
		{"POST", "/api/v1/replays/{id}/pause", h.control("pause"), false},
		{"POST", "/api/v1/replays/{id}/resume", h.control("resume"), false},
		{"POST", "/api/v1/replays/{id}/cancel", h.control("cancel"), false},
		{"POST", "/api/v1/replays/{id}/check", h.check, false},
		{"POST", "/api/v1/replays/{id}/park", h.park, false},
		{"GET", "/api/v1/audit", h.listAudit, false},
		{"GET", "/api/v1/replays/{id}/events", func(w http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
			status, err := h.serveEvents(w, r, c, true)
			return nil, status, err
		}, true},
	}
}

// Authenticate returns the caller a request's bearer token names. With no
// permissions file it refuses with CodeAPIDisabled (404); a missing or
// unknown token is CodeUnauthorized (401). The token is looked up by its
// SHA-256 hash in constant time.
func (s *Service) Authenticate(r *http.Request, via string) (Caller, *Error) {
	if s.ops.Policy() == nil {
		return Caller{}, newError(http.StatusNotFound, CodeAPIDisabled,
			"The HTTP API and MCP endpoint are off: they need a permissions file (DLQBOT_PERMISSIONS) that names principals by their token's SHA-256.")
	}
	authz := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(authz, " ")
	if authz == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		s.ops.RecordAccess(r.Context(), via, "", audit.OpAuthenticate, CodeUnauthorized, "no bearer token; from "+r.RemoteAddr)
		return Caller{}, newError(http.StatusUnauthorized, CodeUnauthorized, "This call needs an Authorization: Bearer <token> header with a principal's token.")
	}
	p, found := s.ops.Policy().Principal(strings.TrimSpace(token))
	if !found {
		s.ops.RecordAccess(r.Context(), via, "", audit.OpAuthenticate, CodeUnauthorized, "an unknown bearer token; from "+r.RemoteAddr)
		return Caller{}, newError(http.StatusUnauthorized, CodeUnauthorized, "The bearer token is not one the permissions file knows; nothing was done.")
	}
	return CallerOf(p, via), nil
}

// serve authenticates, runs fn (within WorkTimeout unless it streams),
// writes its result or error as JSON, and logs the call with its
// principal.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, fn endpoint, stream bool) {
	started := time.Now()
	c, aerr := h.s.Authenticate(r, "api")
	c.Client = clientLabel(r)
	status := 0
	if aerr == nil {
		ctx, cancel := context.WithTimeout(r.Context(), h.s.cfg.WorkTimeout)
		if stream {
			cancel()
			ctx, cancel = context.WithCancel(r.Context())
		}
		defer cancel()
		var body any
		body, status, aerr = fn(w, r.WithContext(ctx), c)
		if aerr == nil && body != nil {
			writeJSON(w, status, body)
		} else if aerr == nil && status == 0 {
			status = http.StatusNoContent
			w.WriteHeader(status)
		}
	}
	ev := h.s.log.Info()
	if aerr != nil {
		if aerr.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dlqbot"`)
		}
		if aerr.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(aerr.RetryAfter.Seconds()+0.999)))
		}
		status = aerr.Status
		writeJSON(w, status, aerr)
		ev = h.s.log.Warn().Str("code", aerr.Code).Str("error", redact.Tokens(aerr.Message))
		if aerr.err != nil {
			ev = ev.Str("cause", aerr.Cause())
		}
		if aerr.RequestID != "" {
			ev = ev.Str("request_id", aerr.RequestID)
		}
	}
	// Tokens are never logged: a path or error quoting one shows its
	// audit.TokenRef.
	ev.Str("principal", c.Principal).Str("as", c.Identity).Str("client", c.Client).Str("method", r.Method).Str("path", redact.Tokens(r.URL.Path)).
		Str("remote", r.RemoteAddr).Int("status", status).Dur("took", time.Since(started)).Msg("api call")
}

// ClientHeader names the program making a call for its user: "terminal"
// or "mcp" (the terminal and `dlqbot mcp` in client mode). It is taken as
// a label for the audit trail and a replay's approved_via only
// (ops.Caller.Client); other values are ignored.
const ClientHeader = "DLQBOT-Client"

func clientLabel(r *http.Request) string {
	switch v := r.Header.Get(ClientHeader); v {
	case "terminal", "mcp":
		return v
	}
	return ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// decode reads a JSON body into v: unknown fields, trailing data and
// bodies over MaxBodyBytes are refused. An empty body is allowed when
// optional.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) *Error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return newError(http.StatusRequestEntityTooLarge, CodeBadRequest, "The request body is over %d bytes.", tooBig.Limit)
		}
		return newError(http.StatusBadRequest, CodeBadRequest, "The request body could not be read.")
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		if optional {
			return nil
		}
		return newError(http.StatusBadRequest, CodeBadRequest, "This call needs a JSON body.")
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return newError(http.StatusBadRequest, CodeBadRequest, "The JSON body is not valid: %s. Nothing was done.", err.Error())
	}
	if dec.More() {
		return newError(http.StatusBadRequest, CodeBadRequest, "The body holds more than one JSON document. Nothing was done.")
	}
	return nil
}

// previewRequest is the body of POST /api/v1/previews.
type previewRequest struct {
	Selection string `json:"selection"`
}

func (h *handler) createPreview(w http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
	var req previewRequest
	if err := h.decode(w, r, &req, false); err != nil {
		return nil, 0, err
	}
	p, err := h.s.Preview(r.Context(), c, req.Selection)
	if err != nil {
		return nil, 0, asError(err, "")
	}
	return p, http.StatusCreated, nil
}

// approveRequest is the body of POST /api/v1/previews/{token}/approve.
type approveRequest struct {
	Params
	// ConfirmChanges is the changes_digest of a "changed" refusal: approve
	// despite exactly those changes.
	ConfirmChanges string `json:"confirm_changes,omitempty"`
}

func (h *handler) approve(w http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
	var req approveRequest
	if err := h.decode(w, r, &req, true); err != nil {
		return nil, 0, err
	}
	rep, err := h.s.Approve(r.Context(), c, r.PathValue("token"), req.Params, req.ConfirmChanges)
	if err != nil {
		return nil, 0, asError(err, "")
	}
	return rep, http.StatusCreated, nil
}

// ApprovalRequest answers a request for a person's approval: the preview
// was posted in Slack (channel, ts) with an Approve button; nothing is
// sent until someone clicks it.
type ApprovalRequest struct {
	Status  string `json:"status"` // "waiting_for_approval"
	Token   string `json:"token"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
	Message string `json:"message"`
}

// WaitingForApproval is ApprovalRequest.Status.
const WaitingForApproval = "waiting_for_approval"

func (h *handler) requestApproval(_ http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
	token := r.PathValue("token")
	ch, ts, err := h.s.RequestApproval(r.Context(), c, token)
	if err != nil {
		return nil, 0, asError(err, "")
	}
	return ApprovalRequest{Status: WaitingForApproval, Token: token, Channel: ch, TS: ts,
		Message: "The preview was posted to Slack for a person to approve; nothing is sent until someone clicks Approve."}, http.StatusAccepted, nil
}

func (h *handler) listReplays(_ http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
	n := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return nil, 0, newError(http.StatusBadRequest, CodeBadRequest, "limit must be a whole number from 1 to %d, not %q.", DefaultMaxList, v)
		}
	}
	rs, hidden, err := h.s.List(r.Context(), c, n)
	if err != nil {
		return nil, 0, asError(err, "")
	}
	return map[string]any{"replays": rs, "hidden": hidden}, http.StatusOK, nil
}

func (h *handler) listDLQs(_ http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
	d, err := h.s.ListDLQs(r.Context(), c)
	if err != nil {
		return nil, 0, asError(err, "")
	}
	return d, http.StatusOK, nil
}

func (h *handler) getReplay(_ http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
	id := r.PathValue("id")
	rep, err := h.s.Replay(r.Context(), c, id)
	if err != nil {
		return nil, 0, asError(err, id)
	}
	return rep, http.StatusOK, nil
}

func (h *handler) control(verb string) endpoint {
	return func(w http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
		// Only resume takes a body: {"resend": "in-doubt"}.
		var body struct {
			Resend string `json:"resend,omitempty"`
		}
		var none struct{}
		var into any = &none
		if verb == string(engine.ControlResume) {
			into = &body
		}
		if err := h.decode(w, r, into, true); err != nil {
			return nil, 0, err
		}
		action, err := engine.ControlAction(verb).WithResend(body.Resend)
		if err != nil {
			return nil, 0, newError(http.StatusBadRequest, CodeBadRequest, "%s. Nothing was done.", err.Error())
		}
		id := r.PathValue("id")
		rep, err := h.s.Control(r.Context(), c, string(action), id)
		if err != nil {
			return nil, 0, asError(err, id)
		}
		return rep, http.StatusAccepted, nil
	}
}

func (h *handler) check(_ http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
	id := r.PathValue("id")
	rep, err := h.s.Check(r.Context(), c, id)
	if err != nil {
		return nil, 0, asError(err, id)
	}
	return rep, http.StatusOK, nil
}

func (h *handler) park(_ http.ResponseWriter, r *http.Request, c Caller) (any, int, *Error) {
	id := r.PathValue("id")
	res, err := h.s.Park(r.Context(), c, id)
	if err != nil {
		return nil, 0, asError(err, id)
	}
	return res, http.StatusOK, nil
}
