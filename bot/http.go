package bot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/rs/zerolog"
	"github.com/slack-go/slack"

	"github.com/stroma/dlqbot/audit"
)

// Handler serves Slack's HTTP requests: POST /slack/commands (slash
// commands) and POST /slack/interactions (button clicks). Each request's
// signature and timestamp are verified on the raw body before anything is
// parsed: a missing, wrong or stale signature gets 401 and has no other
// effect; a body over Config.MaxBodyBytes gets 413; a malformed one 400.
// A valid request is answered 200 at once, the work continuing in the
// background. Mount it on a mux with mux.Handle("/slack/", b.Handler()).
func (b *Bot) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /slack/commands", b.serveCommand)
	mux.HandleFunc("POST /slack/interactions", b.serveInteraction)
	return mux
}

// verified reads r's body and checks Slack's signature over it. It answers
// the request itself and returns false when the body must not be used.
func (b *Bot) verified(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	log := b.log.With().Str("path", r.URL.Path).Str("remote", r.RemoteAddr).Logger()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, b.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			log.Warn().Int64("limit", tooBig.Limit).Msg("slack request refused: body too large")
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return nil, false
		}
		log.Warn().Err(err).Msg("slack request refused: unreadable body")
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return nil, false
	}
	if b.cfg.SigningSecret == "" {
		log.Warn().Msg("slack request refused: no signing secret configured (SLACK_SIGNING_SECRET)")
		http.Error(w, "request signature cannot be verified", http.StatusUnauthorized)
		return nil, false
	}
	sv, err := slack.NewSecretsVerifier(r.Header, b.cfg.SigningSecret)
	if err == nil {
		_, _ = sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		log.Warn().Err(err).Msg("slack request refused: bad signature or timestamp")
		b.d.Ops.RecordAccess(r.Context(), "slack", "", audit.OpSlackRequest, "bad_signature", "a bad or stale signature; from "+r.RemoteAddr)
		http.Error(w, "invalid request signature or timestamp", http.StatusUnauthorized)
		return nil, false
	}
	return body, b.firstArrival(w, r, body, log)
}

// requestKey names a signed request by what its signature covers, its
// timestamp and body, rather than by the signature header: Slack's
// verifier accepts the header's hex in either case, so the same request
// can arrive under several spellings of one signature, never under
// another timestamp or body.
func requestKey(ts string, body []byte) string {
	h := sha256.Sum256(body)
	return "v0:" + ts + ":" + hex.EncodeToString(h[:])
}

// seenFor is how long an accepted request is remembered: longer than its
// signature stays valid (its timestamp may be up to 5 minutes either side
// of now).
const seenFor = 10 * time.Minute

// firstArrival refuses a signed request that was accepted before (a
// captured request sent again): 409 and no effect. When the record cannot
// be read, the request is refused too (503), since it cannot be told from
// a replay.
func (b *Bot) firstArrival(w http.ResponseWriter, r *http.Request, body []byte, log zerolog.Logger) bool {
	if b.d.Seen == nil {
		return true
	}
	first, err := b.d.Seen.FirstSeen(r.Context(), requestKey(r.Header.Get("X-Slack-Request-Timestamp"), body), seenFor)
	switch {
	case err != nil:
		log.Warn().Err(err).Msg("slack request refused: cannot check whether it was received before")
		http.Error(w, "dlqbot cannot check this request right now; nothing was done, try again", http.StatusServiceUnavailable)
		return false
	case !first:
		log.Warn().Str("retry", r.Header.Get("X-Slack-Retry-Num")).Msg("slack request refused: the same signed request was received before")
		b.d.Ops.RecordAccess(r.Context(), "slack", "", audit.OpSlackRequest, "duplicate", "the same signed request received again; from "+r.RemoteAddr)
		http.Error(w, "this request was already received; a signed request is acted on once, so nothing was done", http.StatusConflict)
		return false
	}
	return true
}

// serveCommand acks a slash command.
func (b *Bot) serveCommand(w http.ResponseWriter, r *http.Request) {
	body, ok := b.verified(w, r)
	if !ok {
		return
	}
	// SlashCommandParse reads the form from the body: restore it.
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	cmd, err := slack.SlashCommandParse(r)
	if err == nil {
		err = validCommand(cmd)
	}
	if err != nil {
		b.log.Warn().Err(err).Msg("slack command refused: malformed")
		http.Error(w, "malformed slash command", http.StatusBadRequest)
		return
	}
	reply := b.dispatch(request{kind: kindCommand, cmd: cmd, via: "http"})
	writeAck(w, reply)
}

// serveInteraction acks a block_actions interaction.
func (b *Bot) serveInteraction(w http.ResponseWriter, r *http.Request) {
	body, ok := b.verified(w, r)
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(body))
	var cb slack.InteractionCallback
	switch {
	case err != nil:
	case form.Get("payload") == "":
		err = errors.New("no payload field")
	default:
		if err = json.Unmarshal([]byte(form.Get("payload")), &cb); err == nil {
			err = validAction(cb)
		}
	}
	if err != nil {
		b.log.Warn().Err(err).Msg("slack interaction refused: malformed")
		http.Error(w, "malformed interaction payload", http.StatusBadRequest)
		return
	}
	b.dispatch(request{kind: kindAction, cb: cb, via: "http"})
	w.WriteHeader(http.StatusOK)
}

// writeAck answers a slash command: empty, or with an immediate reply.
func writeAck(w http.ResponseWriter, reply *ackReply) {
	if reply == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(reply)
}
