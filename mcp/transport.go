package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/api"
)

// principalKey and identityKey are where the verified principal's name and
// identity travel in the SDK's token info; its UserID ("principal:<name>")
// binds each session to the principal that opened it.
const (
	principalKey = "dlqbot.principal"
	identityKey  = "dlqbot.identity"
)

// Handler serves the MCP tools over streamable HTTP (mount it at /mcp).
// Every request needs the bearer token of a principal in the permissions
// file, exactly as the HTTP API: without a permissions file it answers 404
// (api_disabled), with a missing or unknown token 401. A session stays
// bound to the principal that opened it.
func Handler(svc *api.Service, cfg Config, log zerolog.Logger) http.Handler {
	log = log.With().Str("component", "mcp").Logger()
	caller := func(req *sdk.CallToolRequest) (api.Caller, error) {
		ti := req.Extra.TokenInfo
		if ti == nil {
			return api.Caller{}, errors.New("no verified bearer token")
		}
		name, _ := ti.Extra[principalKey].(string)
		id, _ := ti.Extra[identityKey].(string)
		if name == "" || id == "" {
			return api.Caller{}, errors.New("no verified principal")
		}
		return api.Caller{Identity: id, Principal: name, FrontEnd: "mcp"}, nil
	}
	srv := NewServer(svc, cfg, caller, log)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute})
	verify := func(_ context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		p, ok := svc.Policy().Principal(token)
		if !ok {
			log.Warn().Str("remote", r.RemoteAddr).Msg("mcp call refused: unknown bearer token")
			return nil, auth.ErrInvalidToken
		}
		c := api.CallerOf(p, "mcp")
		return &auth.TokenInfo{UserID: "principal:" + c.Principal, Extra: map[string]any{principalKey: c.Principal, identityKey: c.Identity}}, nil
	}
	protected := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if svc.Policy() == nil {
			_, aerr := svc.Authenticate(r, "mcp") // api_disabled
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(aerr.Status)
			_ = json.NewEncoder(w).Encode(aerr)
			log.Warn().Str("remote", r.RemoteAddr).Msg("mcp call refused: the API is off (no permissions file)")
			return
		}
		protected.ServeHTTP(w, r)
	})
}

// Serve runs the MCP tools on t (stdio for `dlqbot mcp`) until the client
// disconnects or ctx ends, every call made as caller.
func Serve(ctx context.Context, svc Service, cfg Config, caller api.Caller, t sdk.Transport, log zerolog.Logger) error {
	srv := NewServer(svc, cfg, func(*sdk.CallToolRequest) (api.Caller, error) { return caller, nil }, log)
	return srv.Run(ctx, t)
}
