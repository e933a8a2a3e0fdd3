package main

import (
	"context"
	"fmt"
	"io"

	"github.com/stroma/dlqbot/store"
)

// auditVerifyCommand runs `dlqbot audit verify [--json]`: it walks the
// audit trail's hash chain in Redis (store.Audit.Verify) with this
// process's signing key and reports whether it is intact. Exit 0 when it
// is; 1 with the first break (the entry's id, and whether it was edited
// or forged, entries were deleted before it, or it was inserted); 2 for
// bad usage. It needs Redis and the signing key the trail was written
// with (the operator's credentials), not the broker.
func auditVerifyCommand(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer) error {
	jsonOut := false
	for _, a := range args {
		if a != "--json" {
			return auditFail(stdout, false, usageError("dlqbot audit verify takes no arguments but --json, not %q", a))
		}
		jsonOut = true
	}
	a, err := openApp(cfg, stderr)
	if err != nil {
		return auditFail(stdout, jsonOut, err)
	}
	defer a.Close()
	v, err := a.store.Audit().Verify(ctx)
	if err != nil {
		return auditFail(stdout, jsonOut, failed(err))
	}
	out := &output{w: stdout, json: jsonOut}
	if jsonOut {
		doc := map[string]any{"intact": v.Break == nil, "entries": v.Entries, "unchained": v.Unchained,
			"anchor": v.Anchor, "signed": a.signed}
		if v.Break != nil {
			doc["break"] = map[string]string{"id": v.Break.ID, "kind": v.Break.Kind, "detail": v.Break.Detail}
		}
		_ = out.doc(doc)
	} else {
		printVerification(stdout, v, a.signed)
	}
	if v.Break != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("the audit trail is broken at entry %s (%s)", v.Break.ID, v.Break.Kind)}
	}
	return nil
}

// printVerification writes what Verify found as sentences.
func printVerification(w io.Writer, v store.AuditVerification, signed bool) {
	if v.Break != nil {
		fmt.Fprintf(w, "The audit trail is broken at entry %s: %s — %s.\n", v.Break.ID, v.Break.Kind, v.Break.Detail)
		return
	}
	fmt.Fprintf(w, "The audit trail is intact: %d entries", v.Entries)
	if v.Anchor != "" {
		fmt.Fprintf(w, ", chained from the last trimmed entry %s", v.Anchor)
	}
	fmt.Fprintln(w, ".")
	if v.Unchained > 0 {
		fmt.Fprintf(w, "The first %d entries were written before the trail was chained and cannot be checked.\n", v.Unchained)
	}
	if !signed {
		fmt.Fprintln(w, "No signing key (DLQBOT_SIGNING_KEY): the chain shows edits and deletions, not entries forged by whoever can write Redis.")
	}
}
