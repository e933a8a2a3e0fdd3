package main

import (
	"net/http"
	"time"
)

// httpTimeouts bound how long one connection may hold serve's HTTP server,
// so that a client sending its request slowly (slowloris), reading the
// answer slowly or keeping an idle connection open cannot pin goroutines
// and sockets. A handler that streams (the API's event stream) lifts the
// write deadline for itself with http.ResponseController.
type httpTimeouts struct {
	// ReadHeader bounds reading a request's headers; default 5s.
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included; default 30s
	// (bodies are small: Slack's and the API's are capped at 64 KiB).
	Read time.Duration
	// Write bounds writing the answer, from the end of the headers' read;
	// default 11 minutes, one more than the longest work a request may do
	// (bot.DefaultWorkTimeout, api.DefaultWorkTimeout: a synchronous API
	// preview of a large DLQ).
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next
	// request; default 2 minutes.
	Idle time.Duration
}

func (t httpTimeouts) withDefaults() httpTimeouts {
	if t.ReadHeader <= 0 {
		t.ReadHeader = 5 * time.Second
	}
	if t.Read <= 0 {
		t.Read = 30 * time.Second
	}
	if t.Write <= 0 {
		t.Write = 11 * time.Minute
	}
	if t.Idle <= 0 {
		t.Idle = 2 * time.Minute
	}
	return t
}

// newHTTPServer is serve's HTTP server for h, with every timeout set.
func newHTTPServer(h http.Handler, t httpTimeouts) *http.Server {
	t = t.withDefaults()
	return &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read, WriteTimeout: t.Write, IdleTimeout: t.Idle}
}
