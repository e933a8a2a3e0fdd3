package tokencodec

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/stroma/dlqbot/engine"
)

// IsLegacy reports whether val is in the format tokens were stored in
// before the binary one: JSON (it starts with '{'), or JSON compressed with
// gzip (magic 1f 8b). Consumed tokens are kept 30 days, so these are read
// until the last of them expires.
func IsLegacy(val []byte) bool {
	return len(val) > 0 && val[0] == '{' || len(val) >= 2 && val[0] == 0x1f && val[1] == 0x8b
}

// decodeLegacyToken decodes a token in the JSON/gzip format
// (internal/legacytoken writes it, for tests). It fills Distinct and
// ItemTargets as Decode does.
func decodeLegacyToken(val []byte) (engine.Frozen, error) {
	var f engine.Frozen
	if val[0] == 0x1f {
		zr, err := gzip.NewReader(bytes.NewReader(val))
		if err != nil {
			return f, fmt.Errorf("gunzip: %w", err)
		}
		if val, err = io.ReadAll(zr); err != nil {
			return f, fmt.Errorf("gunzip: %w", err)
		}
	}
	if err := json.Unmarshal(val, &f); err != nil {
		return f, fmt.Errorf("decode: %w", err)
	}
	f.Distinct = len(f.Items)
	for _, it := range f.Items {
		if it.Target != "" && !slices.Contains(f.ItemTargets, it.Target) {
			f.ItemTargets = append(f.ItemTargets, it.Target)
		}
	}
	return f, nil
}
