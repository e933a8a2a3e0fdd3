package main

import (
	"os"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/stroma/dlqbot/metrics"
	"github.com/stroma/dlqbot/store"
)

// signingKey reads the key that signs frozen previews and replay records
// (store/signing.go): DLQBOT_SIGNING_KEY, or the file DLQBOT_SIGNING_KEY_FILE
// (its contents, without a trailing newline). It is at least 32 bytes
// (`openssl rand -hex 32` makes one); every process on one Redis — each
// serve replica, the terminal, `dlqbot mcp` — needs the same key. None
// set: nil, records are written unsigned (serve refuses that unless
// DLQBOT_ACCESS=open without a permissions file, see checkSigning; the
// direct terminal and `dlqbot mcp` with a permissions file refuse too,
// see checkDirect).
func signingKey(cfg config) ([]byte, error) {
	key := cfg.SigningKey
	switch {
	case cfg.SigningKey != "" && cfg.SigningKeyFile != "":
		return nil, usageError("set DLQBOT_SIGNING_KEY or DLQBOT_SIGNING_KEY_FILE, not both")
	case cfg.SigningKeyFile != "":
		data, err := os.ReadFile(cfg.SigningKeyFile)
		if err != nil {
			return nil, usageError("DLQBOT_SIGNING_KEY_FILE: %v", err)
		}
		key = strings.TrimRight(string(data), "\r\n")
	}
	if key == "" {
		return nil, nil
	}
	if len(key) < store.MinSigningKey {
		return nil, usageError("the signing key (DLQBOT_SIGNING_KEY or its file) has %d bytes; use at least %d random ones (openssl rand -hex 32)", len(key), store.MinSigningKey)
	}
	return []byte(key), nil
}

// checkSigning is serve's rule: without a signing key, whoever can write
// Redis could change a token's targets or a replay's approver unnoticed,
// so serve refuses to start unless the operator chose an open setup
// (DLQBOT_ACCESS=open and no permissions file; the demo runs that way). A
// loaded policy is always backed by signed records: DLQBOT_ACCESS=open
// does not turn signing off then.
func checkSigning(cfg config, signed bool, log zerolog.Logger) error {
	if signed {
		return nil
	}
	if cfg.PermissionsFile != "" {
		return usageError("dlqbot serve with a permissions file (DLQBOT_PERMISSIONS) needs a signing key for the previews and replays it keeps in Redis, DLQBOT_ACCESS=open or not: set DLQBOT_SIGNING_KEY (or DLQBOT_SIGNING_KEY_FILE) to at least 32 random bytes, the same on every replica")
	}
	if !cfg.AccessOpen {
		return usageError("dlqbot serve needs a signing key for the previews and replays it keeps in Redis: set DLQBOT_SIGNING_KEY (or DLQBOT_SIGNING_KEY_FILE) to at least 32 random bytes, the same on every replica and terminal, or set DLQBOT_ACCESS=open to run without one")
	}
	log.Warn().Msg("no signing key (DLQBOT_SIGNING_KEY): previews and replay records in Redis are unsigned, so whoever can write Redis can change them unnoticed")
	return nil
}

// storeSigning is the store's signing configuration from cfg, logging
// every refused record at Error and counting it on the metrics counted
// holds once there are any.
func storeSigning(cfg config, key []byte, log zerolog.Logger, sc *store.Config, counted *atomic.Pointer[metrics.Metrics]) {
	sc.SigningKey, sc.AcceptUnsigned = key, cfg.AcceptUnsigned
	sc.OnBadSignature = func(err *store.SignatureError) {
		if m := counted.Load(); m != nil {
			m.RecordRefused(err.Kind)
		}
		log.Error().Str("record", err.Kind).Str("id", err.ID).Str("reason", err.Reason).
			Msg("refused a record in Redis that failed its signature check: it was changed outside dlqbot, or written without this key")
	}
}
