// Package dashapi adapts the operations layer (ops.Ops) to the
// dashboard's Backend: every decision — which replays a person sees,
// which controls they are offered, whether a pause is done, which audit
// entries they may read — is an operation or a policy query of package
// ops, for an ops.Caller built from the signed-in principal acting
// through front end "dashboard". The dashboard itself decides nothing.
//
// Files:
//
//	dashapi.go  Backend, New and the dashboard's Backend methods
package dashapi
