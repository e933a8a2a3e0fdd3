package slackstub

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// Identities the stand-in reports for its workspace and its bot user.
const (
	TeamID    = "T0STUB"
	TeamName  = "Stub workspace"
	BotUserID = "U0DLQBOT"
	BotID     = "B0DLQBOT"
	AppID     = "A0DLQBOT"
)

// firstTS is the seconds part of the first message timestamp handed out.
const firstTS = 1732900000

// fault is an injected failure of one Web API call.
type fault struct {
	status     int
	retryAfter int // seconds; 0 = no header
	err        string
}

// Stub is the Slack stand-in.
type Stub struct {
	srv    *httptest.Server
	mux    *http.ServeMux
	base   string // the stand-in's base URL, as handed out in URLs
	secret string
	// Now tells the time used to sign requests (default time.Now); tests
	// set it to make stale requests.
	Now func() time.Time

	mu          sync.Mutex
	seq         int64
	calls       []Call
	channels    map[string][]*message // top-level and replies, in post order
	byTS        map[string]*message   // channel+"/"+ts → message
	ephemerals  []Ephemeral
	responses   map[string]*responseTarget
	faults      map[string][]fault
	groups      map[string][]string // user group id → members
	files       map[string]*File
	fileOrder   []string
	chanErrors  map[string]string
	inChannelTS map[string]string // response posts made in_channel
	sock        *socketHub
	web         webState
	// rev counts changes a reader of the page could see; changed is
	// closed and replaced at each one (see touch).
	rev     int64
	changed chan struct{}
}

// New starts a stand-in on a random local port whose requests to the bot
// are signed with signingSecret.
func New(signingSecret string) *Stub {
	s, mux := newStub(signingSecret)
	s.srv = httptest.NewServer(mux)
	s.base = s.srv.URL
	return s
}

// Listen starts a stand-in on addr (such as "127.0.0.1:8088"; port 0
// picks one) whose requests to the bot are signed with signingSecret. It
// fails when addr cannot be listened on, for instance when the port is
// taken. An unspecified host (":8088") is handed out as 127.0.0.1.
func Listen(addr, signingSecret string) (*Stub, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s, mux := newStub(signingSecret)
	s.srv = httptest.NewUnstartedServer(mux)
	_ = s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	s.base = s.srv.URL
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		s.base = fmt.Sprintf("http://127.0.0.1:%d", tcp.Port)
	}
	return s, nil
}

// newStub returns an unstarted stand-in and its routes.
func newStub(signingSecret string) (*Stub, *http.ServeMux) {
	s := &Stub{
		secret:      signingSecret,
		Now:         time.Now,
		channels:    map[string][]*message{},
		byTS:        map[string]*message{},
		responses:   map[string]*responseTarget{},
		faults:      map[string][]fault{},
		groups:      map[string][]string{},
		files:       map[string]*File{},
		chanErrors:  map[string]string{},
		inChannelTS: map[string]string{},
		changed:     make(chan struct{}),
	}
	s.sock = newSocketHub(s)
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("POST /response/{id}", s.serveResponse)
	mux.HandleFunc("POST /upload/{id}", s.serveUpload)
	mux.HandleFunc("GET /socket", s.sock.serve)
	s.routeWeb(mux)
	s.mux = mux
	return s, mux
}

// Mount serves h at pattern beside the page (the demo mounts dlqbot's
// dashboard at /dashboard/ this way, so both share one address).
func (s *Stub) Mount(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// URL is the stand-in's base URL; GET on it serves the page.
func (s *Stub) URL() string { return s.base }

// APIURL is the Web API base URL to give the bot (SLACK_API_URL).
func (s *Stub) APIURL() string { return s.base + "/api/" }

// Close stops the server and any Socket Mode connection.
func (s *Stub) Close() {
	s.mu.Lock()
	s.web.closed = true
	s.touch() // wakes the page's pending reads
	s.mu.Unlock()
	s.sock.close()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// touch records a change the page shows and wakes its readers (callers
// hold mu).
func (s *Stub) touch() {
	s.rev++
	close(s.changed)
	s.changed = make(chan struct{})
}

// nextID returns a new sequence number (callers hold mu).
func (s *Stub) nextID() int64 {
	s.seq++
	return s.seq
}

// ts returns a new message timestamp: unique, increasing, with Slack's
// microsecond format (callers hold mu).
func (s *Stub) ts() string {
	n := s.nextID()
	return fmt.Sprintf("%d.%06d", firstTS+n/10000, (n%10000)*100)
}

// SetUserGroups sets the workspace's user groups: group id (S…) → member
// user ids.
func (s *Stub) SetUserGroups(groups map[string][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = map[string][]string{}
	for g, us := range groups {
		s.groups[g] = append([]string(nil), us...)
	}
}

// SetChannelError makes chat.postMessage to channel fail with a Slack error
// such as "not_in_channel" ("" clears it).
func (s *Stub) SetChannelError(channel, slackError string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slackError == "" {
		delete(s.chanErrors, channel)
		return
	}
	s.chanErrors[channel] = slackError
}

// RateLimit makes the next n calls of method answer 429 with
// "Retry-After: 1", as Slack does when a rate limit is hit.
func (s *Stub) RateLimit(method string, n int) {
	s.inject(method, n, fault{status: http.StatusTooManyRequests, retryAfter: 1, err: "ratelimited"})
}

// Fail makes the next n calls of method answer with HTTP status (500 for
// an outage); nothing else happens on those calls.
func (s *Stub) Fail(method string, n, status int) {
	s.inject(method, n, fault{status: status, err: "fatal_error"})
}

func (s *Stub) inject(method string, n int, f fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[method] = append(s.faults[method], f)
	}
}

// Calls returns the recorded calls of method, oldest first; every call
// when method is "".
func (s *Stub) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Messages returns channel's top-level messages, oldest first, each with
// its current blocks and its thread's replies.
func (s *Stub) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.channels[channel] {
		if m.deleted || m.ThreadTS != "" {
			continue
		}
		out = append(out, s.withReplies(m))
	}
	return out
}

// Message returns the message at ts in channel (a top-level message with
// its replies, or a reply).
func (s *Stub) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.byTS[channel+"/"+ts]
	if !ok || m.deleted {
		return Message{}, false
	}
	return s.withReplies(m), true
}

// withReplies copies m with its replies (callers hold mu).
func (s *Stub) withReplies(m *message) Message {
	out := copyMessage(m.Message)
	if m.ThreadTS != "" {
		return out
	}
	for _, r := range s.channels[m.Channel] {
		if !r.deleted && r.ThreadTS == m.TS {
			out.Replies = append(out.Replies, copyMessage(r.Message))
		}
	}
	return out
}

func copyMessage(m Message) Message {
	m.Blocks = append([]slack.Block(nil), m.Blocks...)
	m.EditedAt = append([]time.Time(nil), m.EditedAt...)
	m.Files = append([]File(nil), m.Files...)
	m.Replies = nil
	return m
}

// Ephemerals returns what user saw ephemerally, oldest first (every user's
// when user is "").
func (s *Stub) Ephemerals(user string) []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Ephemeral
	for _, e := range s.ephemerals {
		if user == "" || e.User == user {
			out = append(out, e)
		}
	}
	return out
}

// Files returns the uploaded files that were shared, oldest first.
func (s *Stub) Files() []File {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []File
	for _, id := range s.fileOrder {
		if f := s.files[id]; f.Channel != "" {
			out = append(out, *f)
		}
	}
	return out
}

// trimMethod returns the Web API method of a request path.
func trimMethod(path string) string {
	return strings.Trim(strings.TrimPrefix(path, "/api/"), "/")
}

// DMChannel is the id of the direct message conversations.open opens
// between the bot and user.
func DMChannel(user string) string { return "D" + user }
