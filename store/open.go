package store

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is REDIS_URL's default.
const DefaultURL = "redis://127.0.0.1:6379/0"

// Open returns a client for url (REDIS_URL; "" means DefaultURL). It does
// not dial: use Store.Ping to check the connection. The forms are:
//
//	redis://[user:password@]host:port[/db][?option=value…]
//	    a single node; rediss:// for TLS; unix:///path/redis.sock?db=n.
//	redis://[user:password@]host1:port1,host2:port2[?option=value…]
//	    Redis Cluster, the hosts being seed nodes; "?addr=host2:port2" may
//	    add seeds too, and "?cluster=true" selects Cluster with a single
//	    seed. A Cluster has no databases: the path must be empty or /0.
//	redis://[user:password@]sentinel1:port1,sentinel2:port2[/db]?master_name=name
//	    Sentinel ("master=name" is accepted too). The userinfo authenticates
//	    to the sentinels; "password=…" (and "username=…") to the master.
//
// Options are go-redis's, in snake case (dial_timeout=2s, max_retries=1,
// pool_size=20, skip_verify=true …); an unknown option is an error.
func Open(rawURL string) (redis.UniversalClient, error) {
	if rawURL == "" {
		rawURL = DefaultURL
	}
	base, extra := splitHosts(rawURL)
	u, err := url.Parse(base)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL itself may hold a password
		}
		return nil, fmt.Errorf("store: parse REDIS_URL: %w", err)
	}
	q := u.Query()
	for _, h := range extra {
		q.Add("addr", h)
	}
	if m := q.Get("master"); m != "" && q.Get("master_name") == "" {
		q.Set("master_name", m)
	}
	q.Del("master")
	cluster := false
	if v := q.Get("cluster"); v != "" {
		if cluster, err = strconv.ParseBool(v); err != nil {
			return nil, fmt.Errorf("store: parse REDIS_URL: cluster=%q: %w", v, err)
		}
	}
	q.Del("cluster")
	u.RawQuery = q.Encode()

	switch {
	case u.Scheme == "unix":
		opts, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("store: parse REDIS_URL: %w", err)
		}
		return redis.NewClient(opts), nil
	case q.Get("master_name") != "":
		opts, err := redis.ParseFailoverURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("store: parse REDIS_URL (sentinel): %w", err)
		}
		return redis.NewFailoverClient(opts), nil
	case cluster || len(q["addr"]) > 0:
		if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
			return nil, fmt.Errorf("store: parse REDIS_URL: a cluster has no database %q", p)
		}
		u.Path = ""
		opts, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("store: parse REDIS_URL (cluster): %w", err)
		}
		return redis.NewClusterClient(opts), nil
	default:
		opts, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("store: parse REDIS_URL: %w", err)
		}
		return redis.NewClient(opts), nil
	}
}

// splitHosts turns "scheme://user@h1:p1,h2:p2/rest" into
// "scheme://user@h1:p1/rest" and the extra hosts ["h2:p2"].
func splitHosts(raw string) (string, []string) {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw, nil
	}
	start := i + 3
	end := len(raw)
	if j := strings.IndexAny(raw[start:], "/?#"); j >= 0 {
		end = start + j
	}
	auth := raw[start:end]
	hostStart := start
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		hostStart = start + at + 1
	}
	hosts := strings.Split(raw[hostStart:end], ",")
	if len(hosts) < 2 {
		return raw, nil
	}
	var extra []string
	for _, h := range hosts[1:] {
		if h = strings.TrimSpace(h); h != "" {
			extra = append(extra, h)
		}
	}
	return raw[:hostStart] + strings.TrimSpace(hosts[0]) + raw[end:], extra
}
