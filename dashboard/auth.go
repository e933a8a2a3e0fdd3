package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/stroma/dlqbot/commands"
)

// Names of the sign-in's cookie and headers.
const (
	// SessionCookie holds a signed session: HttpOnly, SameSite=Strict,
	// Secure when the dashboard is served over TLS.
	SessionCookie = "dlqbot_session"
	// HeaderEmail and HeaderUser are oauth2-proxy's identity headers,
	// trusted only from Config.TrustedProxies.
	HeaderEmail = "X-Forwarded-Email"
	HeaderUser  = "X-Forwarded-User"
)

// session is a signed-in person: the principal, how it signed in, and the
// CSRF token its forms carry.
type session struct {
	p    commands.Principal
	csrf string
	// via is ViaToken or ViaProxy.
	via string
	// id names a token session for its revocation (sessionID), and exp is
	// when it expires; both unset for a proxy's sign-in.
	id  string
	exp time.Time
}

// sessionData is the signed cookie's payload.
type sessionData struct {
	// Principal is the principal's name; Hash the first bytes of its
	// token's hash, so that a rotated token ends its sessions.
	Principal string `json:"p"`
	Hash      string `json:"h"`
	Expires   int64  `json:"x"`
	// Nonce is random per sign-in; the CSRF token derives from it.
	Nonce string `json:"n"`
}

// Ways a person signs in to the dashboard (SignedInVia).
const (
	// ViaToken: a principal's bearer token, exchanged for a session.
	ViaToken = "token"
	// ViaProxy: a trusted proxy's identity header.
	ViaProxy = "proxy"
)

type viaKey struct{}

// SignedInVia returns how the person behind a request's context signed
// in (ViaToken or ViaProxy); ViaToken when the context does not say, the
// stricter of the two. The Backend asks it, since a person a proxy signs
// in is not a caller with a bearer token.
func SignedInVia(ctx context.Context) string {
	if v, ok := ctx.Value(viaKey{}).(string); ok && v == ViaProxy {
		return ViaProxy
	}
	return ViaToken
}

// withVia returns ctx saying how its person signed in.
func withVia(ctx context.Context, via string) context.Context {
	return context.WithValue(ctx, viaKey{}, via)
}

// mac signs msg with the session key, for purpose.
func (d *Dashboard) mac(purpose, msg string) []byte {
	m := hmac.New(sha256.New, d.key)
	m.Write([]byte(purpose + "\x00" + msg))
	return m.Sum(nil)
}

func (d *Dashboard) csrfFor(kind, id string) string {
	return hex.EncodeToString(d.mac("csrf", kind+":"+id))[:32]
}

// newSession returns the cookie value of a fresh session of p.
func (d *Dashboard) newSession(p commands.Principal) (string, time.Time) {
	var n [16]byte
	_, _ = rand.Read(n[:])
	exp := d.now().Add(d.cfg.SessionTTL)
	data, _ := json.Marshal(sessionData{Principal: p.Name, Hash: hex.EncodeToString(p.TokenSHA256[:8]), Expires: exp.Unix(),
		Nonce: hex.EncodeToString(n[:])})
	payload := base64.RawURLEncoding.EncodeToString(data)
	return payload + "." + base64.RawURLEncoding.EncodeToString(d.mac("session", payload)), exp
}

// readSession returns the session a cookie value holds, when its signature
// is right, it has not expired, it was not signed out and its principal
// still has that token. When whether it was signed out cannot be told,
// nobody is signed in.
func (d *Dashboard) readSession(ctx context.Context, v string) (session, bool) {
	payload, sig, ok := strings.Cut(v, ".")
	if !ok {
		return session{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, d.mac("session", payload)) {
		return session{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var sd sessionData
	if err != nil || json.Unmarshal(raw, &sd) != nil || d.now().Unix() >= sd.Expires {
		return session{}, false
	}
	for _, p := range d.cfg.Policy.Principals {
		if p.Name == sd.Principal && hex.EncodeToString(p.TokenSHA256[:8]) == sd.Hash {
			id := sessionID(sd.Nonce)
			revoked, err := d.d.Revocations.Revoked(ctx, id)
			if err != nil {
				d.log.Error().Err(err).Str("principal", p.Name).Msg("dashboard: whether a session was signed out cannot be told; refused")
				return session{}, false
			}
			if revoked {
				return session{}, false
			}
			return session{p: p, csrf: d.csrfFor("session", sd.Nonce), via: ViaToken, id: id, exp: time.Unix(sd.Expires, 0)}, true
		}
	}
	return session{}, false
}

// trusted reports whether the request comes straight from a configured
// proxy address.
func (d *Dashboard) trusted(r *http.Request) bool {
	if len(d.cfg.TrustedProxies) == 0 {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, pfx := range d.cfg.TrustedProxies {
		if pfx.Contains(ip) {
			return true
		}
	}
	return false
}

// signedIn returns the request's session: the trusted proxy's identity
// header when the request comes from a trusted proxy and carries one (a
// header from any other address is ignored), else the session cookie.
func (d *Dashboard) signedIn(r *http.Request) (session, bool) {
	if d.trusted(r) {
		id := strings.TrimSpace(r.Header.Get(HeaderEmail))
		if id == "" {
			id = strings.TrimSpace(r.Header.Get(HeaderUser))
		}
		if id != "" {
			if p, ok := d.cfg.Policy.PrincipalByEmail(id); ok {
				return session{p: p, csrf: d.csrfFor("proxy", strings.ToLower(id)), via: ViaProxy}, true
			}
			d.log.Warn().Str("identity", id).Str("remote", r.RemoteAddr).Msg("dashboard: the proxy's identity maps to no principal (add it to a principal's emails)")
			return session{}, false
		}
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return session{}, false
	}
	return d.readSession(r.Context(), c.Value)
}

// secure reports whether the request reached dlqbot over TLS (directly,
// or through a trusted proxy that says so).
func (d *Dashboard) secure(r *http.Request) bool {
	return r.TLS != nil || (d.trusted(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}

// setSession sets (value != "") or clears the session cookie.
func (d *Dashboard) setSession(w http.ResponseWriter, r *http.Request, value string, exp time.Time) {
	c := &http.Cookie{Name: SessionCookie, Value: value, Path: "/dashboard/", HttpOnly: true,
		Secure: d.secure(r), SameSite: http.SameSiteStrictMode}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.Expires = exp
	}
	http.SetCookie(w, c)
}

// checkPost refuses a state-changing request whose CSRF token is not the
// session's, or that another site's page sent (Origin).
func (d *Dashboard) checkPost(r *http.Request, s session) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if !strings.EqualFold(strings.TrimPrefix(strings.TrimPrefix(o, "https://"), "http://"), r.Host) {
			return false
		}
	}
	got := r.PostFormValue("csrf")
	return got != "" && hmac.Equal([]byte(got), []byte(s.csrf))
}
