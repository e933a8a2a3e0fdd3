package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stroma/dlqbot/api"
	"github.com/stroma/dlqbot/audit"
	"github.com/stroma/dlqbot/ops"
)

// auditCommand runs `dlqbot audit [filter=value…] [--json]` (and `dlqbot
// audit verify`, auditverify.go): the audit
// trail, oldest first, as a table, or with --json as JSON lines (one
// entry each, the lines of GET /api/v1/audit). The filters are the API's
// query parameters (since, until, principal, front_end, op, outcome, dlq,
// replay_id, after, limit). It shows the entries the terminal's caller
// may see, as the API does (ops.Ops.AuditVisible): with
// DLQBOT_PERMISSIONS those of the DLQs the principal naming the OS user
// may read, and its own; without, every entry. With DLQBOT_SERVER it asks
// that server (GET /api/v1/audit) as the principal of DLQBOT_TOKEN.
func auditCommand(ctx context.Context, cfg config, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "verify" {
		return auditVerifyCommand(ctx, cfg, args[1:], stdout, stderr)
	}
	jsonOut := false
	q := map[string][]string{}
	for _, a := range args {
		if a == "--json" {
			jsonOut = true
			continue
		}
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return auditFail(stdout, jsonOut, usageError("dlqbot audit takes filters as key=value (since=2h op=pause principal=runbook …), not %q", a))
		}
		q[k] = append(q[k], v)
	}
	f, ferr := api.ParseAuditFilter(q, time.Now())
	if ferr != nil {
		return auditFail(stdout, jsonOut, usageError("dlqbot audit: %s", ferr.Message))
	}
	var entries []audit.Entry
	if cfg.Server != "" {
		var err error
		if entries, err = newRemote(cfg, ops.FrontTerminal).c.Audit(ctx, url.Values(q)); err != nil {
			return auditFail(stdout, jsonOut, remoteErr(err))
		}
	} else {
		var err error
		if entries, err = directAudit(ctx, cfg, f, stderr); err != nil {
			return auditFail(stdout, jsonOut, err)
		}
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return failed(err)
			}
		}
		return nil
	}
	printAudit(stdout, entries)
	return nil
}

// directAudit reads the trail from Redis, in the operator's direct mode.
func directAudit(ctx context.Context, cfg config, f audit.Filter, stderr io.Writer) ([]audit.Entry, error) {
	if err := checkDirect(cfg, "dlqbot audit"); err != nil {
		return nil, err
	}
	a, err := newApp(cfg, stderr, false)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	if err := a.terminalOps(); err != nil {
		return nil, err
	}
	if err := a.ping(ctx); err != nil {
		return nil, failed(err)
	}
	svc, err := api.New(api.Config{}, api.Deps{Ops: a.ops, AuditLog: a.store.Audit(), Log: a.log})
	if err != nil {
		return nil, failed(err)
	}
	entries, err := svc.Audit(ctx, a.caller, f)
	if err != nil {
		return nil, failed(err)
	}
	return entries, nil
}

// auditFail reports err as the terminal does: one JSON document with an
// error field, or a sentence.
func auditFail(w io.Writer, jsonOut bool, err error) error {
	return (&output{w: w, json: jsonOut}).fail(err)
}

// printAudit writes entries as a table.
func printAudit(w io.Writer, entries []audit.Entry) {
	if len(entries) == 0 {
		fmt.Fprintln(w, "No audit entries match.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME (UTC)\tWHO\tVIA\tOPERATION\tOUTCOME\tREPLAY / TOKEN\tDLQ\tMESSAGES")
	for _, e := range entries {
		who := e.Principal
		if e.Identity != "" && e.Identity != e.Principal {
			who += " (" + e.Identity + ")"
		}
		outcome := e.Outcome
		if e.Code != "" {
			outcome += ": " + e.Code
		}
		ref := e.ReplayID
		if ref == "" {
			ref = e.TokenRef
		}
		n := ""
		if e.Messages > 0 {
			n = fmt.Sprint(e.Messages)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format("2006-01-02 15:04:05"), who, e.FrontEnd, e.Op, outcome, ref, e.DLQ, n)
	}
	_ = tw.Flush()
	if len(entries) == api.DefaultAuditList {
		fmt.Fprintf(w, "(the first %d; continue with after=%s, or set limit=)\n", len(entries), entries[len(entries)-1].ID)
	}
}
