package deploy

import (
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// secretEnv are the settings that hold credentials: the Deployment reads
// each from the Secret, under its own name, never from a literal value.
// All but SLACK_APP_TOKEN (Socket Mode only) must be wired.
var secretEnv = []string{"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "AMQP_URL", "RABBITMQ_MANAGEMENT_URL", "REDIS_URL", "DLQBOT_SIGNING_KEY"}

// subset says whether every label of sel is in labels (and sel has some).
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerPort resolves a probe's or a Service's port (a number or a
// container port's name) to a number; 0 when it names no port.
func containerPort(c kContainer, p any) int {
	switch v := p.(type) {
	case int:
		return v
	case string:
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		for _, cp := range c.Ports {
			if cp.Name == v {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

// checkKube returns every way the rendered manifests (stream) break what
// issue 14 asks of them, given the image's user and the SIGTERM drain
// bound; nil means none.
func checkKube(stream []byte, uid int64, drain time.Duration) []string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	docs, err := splitDocs(stream)
	if err != nil {
		return []string{err.Error()}
	}
	var deps []kDeployment
	var svcs []kService
	var pdbs []kPDB
	for _, d := range docs {
		var head struct{ Kind string }
		_ = yaml.Unmarshal(d, &head)
		var err error
		switch head.Kind {
		case "Deployment":
			var o kDeployment
			err = decodeStrict(d, &o)
			deps = append(deps, o)
		case "Service":
			var o kService
			err = decodeStrict(d, &o)
			svcs = append(svcs, o)
		case "PodDisruptionBudget":
			var o kPDB
			err = decodeStrict(d, &o)
			pdbs = append(pdbs, o)
		case "Secret":
			bad("the manifests hold a Secret: applying them would overwrite the real credentials (create it by hand, docs/operating.md)")
		default:
			bad("unexpected object of kind %q", head.Kind)
		}
		if err != nil {
			bad("%s: %v", head.Kind, err)
		}
	}
	if len(deps) != 1 || len(svcs) != 1 {
		bad("%d Deployments and %d Services, want one of each", len(deps), len(svcs))
		return problems
	}
	dep, svc := deps[0], svcs[0]
	pod := dep.Spec.Template.Spec
	labels := dep.Spec.Template.Metadata.Labels

	if dep.APIVersion != "apps/v1" {
		bad("Deployment apiVersion %q, want apps/v1", dep.APIVersion)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		bad("Deployment replicas %v, want 2", dep.Spec.Replicas)
	}
	if !subset(dep.Spec.Selector.MatchLabels, labels) {
		bad("the Deployment's selector %v does not select its pods' labels %v", dep.Spec.Selector.MatchLabels, labels)
	}
	if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= drain {
		bad("terminationGracePeriodSeconds %v does not cover the SIGTERM drain (%s; Kubernetes' default is 30 s)", pod.TerminationGracePeriodSeconds, drain)
	}
	if len(pod.Containers) != 1 {
		bad("%d containers, want one", len(pod.Containers))
		return problems
	}
	c := pod.Containers[0]
	if len(c.Command) != 0 {
		bad("the container overrides the image's entrypoint with %v", c.Command)
	}
	if c.Args != nil && !slices.Equal(c.Args, []string{"serve"}) {
		bad("the container runs %v, want serve", c.Args)
	}

	// The port dlqbot listens on, the probes and the Service.
	addr := ":8080"
	for _, e := range c.Env {
		if e.Name == "DLQBOT_HTTP_ADDR" {
			addr = e.Value
		}
	}
	_, p, _ := net.SplitHostPort(addr)
	listen, _ := strconv.Atoi(p)
	if !slices.ContainsFunc(c.Ports, func(cp struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	}) bool {
		return cp.ContainerPort == listen
	}) {
		bad("dlqbot listens on %s (DLQBOT_HTTP_ADDR) but the container declares no port %d", addr, listen)
	}
	probe := func(name string, pr *kProbe, path string, minTimeout int) {
		switch {
		case pr == nil || pr.HTTPGet == nil:
			bad("no %s HTTP probe", name)
		case pr.HTTPGet.Path != path:
			bad("the %s probe asks %s, want %s", name, pr.HTTPGet.Path, path)
		case containerPort(c, pr.HTTPGet.Port) != listen:
			bad("the %s probe asks port %v, but dlqbot listens on %d", name, pr.HTTPGet.Port, listen)
		case max(pr.TimeoutSeconds, 1) < minTimeout:
			bad("the %s probe gives up after %d s; it needs at least %d s", name, max(pr.TimeoutSeconds, 1), minTimeout)
		}
	}
	// /readyz waits up to 3 s for RabbitMQ and Redis (cmd/dlqbot/serve.go).
	probe("readiness", c.ReadinessProbe, "/readyz", 4)
	probe("liveness", c.LivenessProbe, "/healthz", 1)
	if !subset(svc.Spec.Selector, labels) {
		bad("the Service's selector %v does not select the pods' labels %v", svc.Spec.Selector, labels)
	}
	for _, sp := range svc.Spec.Ports {
		if containerPort(c, sp.TargetPort) != listen {
			bad("the Service's port %d targets %v, but dlqbot listens on %d", sp.Port, sp.TargetPort, listen)
		}
	}
	if len(svc.Spec.Ports) == 0 {
		bad("the Service has no port")
	}
	for _, pdb := range pdbs {
		if !subset(pdb.Spec.Selector.MatchLabels, labels) {
			bad("the PodDisruptionBudget's selector %v does not select the pods' labels %v", pdb.Spec.Selector.MatchLabels, labels)
		}
	}

	// Non-root, read-only, no capabilities.
	sec := func(get func(*kSecurity) any) any { // the container's setting, else the pod's
		for _, s := range []*kSecurity{c.SecurityContext, pod.SecurityContext} {
			if s != nil {
				if v := get(s); !reflect.ValueOf(v).IsNil() {
					return reflect.ValueOf(v).Elem().Interface()
				}
			}
		}
		return nil
	}
	if v := sec(func(s *kSecurity) any { return s.RunAsNonRoot }); v != true {
		bad("runAsNonRoot is not true")
	}
	if v := sec(func(s *kSecurity) any { return s.RunAsUser }); v != nil && v != uid {
		bad("runAsUser %v, but the image's user is %d (Dockerfile)", v, uid)
	}
	cs := c.SecurityContext
	if cs == nil {
		cs = &kSecurity{}
	}
	if cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem {
		bad("the container's readOnlyRootFilesystem is not true")
	}
	if cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
		bad("the container's allowPrivilegeEscalation is not false")
	}
	if cs.Capabilities == nil || !slices.Contains(cs.Capabilities.Drop, "ALL") || len(cs.Capabilities.Add) > 0 {
		bad("the container does not drop ALL capabilities (and add none)")
	}

	// Settings: known names; credentials from one Secret.
	secret := ""
	wired := map[string]bool{}
	for _, e := range c.Env {
		if !slices.Contains(configEnv, e.Name) {
			bad("env %s is not a setting dlqbot reads", e.Name)
		}
		if !slices.Contains(secretEnv, e.Name) {
			continue
		}
		ref := (*kKeyRef)(nil)
		if e.ValueFrom != nil {
			ref = e.ValueFrom.SecretKeyRef
		}
		switch {
		case ref == nil:
			bad("%s is not read from the Secret (a credential must not be a literal value)", e.Name)
		case ref.Key != e.Name:
			bad("%s is read from the Secret's key %s: use the setting's own name", e.Name, ref.Key)
		case secret != "" && ref.Name != secret:
			bad("%s is read from Secret %s, the others from %s", e.Name, ref.Name, secret)
		default:
			secret = ref.Name
			wired[e.Name] = true
		}
	}
	for _, n := range secretEnv {
		if !wired[n] && n != "SLACK_APP_TOKEN" {
			bad("%s is not read from the Secret", n)
		}
	}
	mounted := map[string]bool{}
	for _, v := range pod.Volumes {
		mounted[v.Name] = true
	}
	for _, m := range c.VolumeMounts {
		if !mounted[m.Name] {
			bad("volume mount %s names no volume", m.Name)
		}
	}
	return problems
}

func TestCheckKubeRejects(t *testing.T) {
	good, err := readKustomization("k8s")
	if err != nil {
		t.Fatal(err)
	}
	const uid, drain = 65532, 72 * time.Second
	if p := checkKube(good, uid, drain); len(p) != 0 {
		t.Fatalf("the manifests are refused: %v", p)
	}
	cases := []struct{ name, from, to, want string }{
		{"one replica", "replicas: 2", "replicas: 1", "replicas"},
		{"typo", "readinessProbe:", "readinesProbe:", "readinesProbe"},
		{"ready on healthz", "path: /readyz", "path: /healthz", "/readyz"},
		{"live on readyz", "path: /healthz", "path: /readyz", "/healthz"},
		{"probe timeout", "timeoutSeconds: 5", "timeoutSeconds: 1", "gives up"},
		{"probe port", "port: http\n            periodSeconds: 5", "port: 9090\n            periodSeconds: 5", "probe asks port"},
		{"short grace", "terminationGracePeriodSeconds: 90", "terminationGracePeriodSeconds: 30", "SIGTERM drain"},
		{"root", "runAsNonRoot: true\n            allowPrivilegeEscalation", "runAsNonRoot: false\n            allowPrivilegeEscalation", "runAsNonRoot"},
		{"other user", "runAsUser: 65532", "runAsUser: 1000", "image's user"},
		{"writable", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
		{"escalation", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", "allowPrivilegeEscalation"},
		{"caps", `drop: ["ALL"]`, `drop: ["NET_RAW"]`, "ALL capabilities"},
		{"literal secret", "- name: REDIS_URL\n              valueFrom:\n                secretKeyRef: {name: dlqbot, key: REDIS_URL}", "- name: REDIS_URL\n              value: redis://:hunter2@redis:6379/0", "literal"},
		{"wrong key", "key: AMQP_URL}", "key: amqp-url}", "own name"},
		{"two secrets", "{name: dlqbot, key: REDIS_URL}", "{name: redis, key: REDIS_URL}", "Secret redis"},
		{"env typo", "- name: RABBITMQ_MANAGEMENT_URL", "- name: RABBITMQ_MGMT_URL", "RABBITMQ_MGMT_URL"},
		{"missing secret", "            - name: SLACK_BOT_TOKEN\n              valueFrom:\n                secretKeyRef: {name: dlqbot, key: SLACK_BOT_TOKEN}\n", "", "SLACK_BOT_TOKEN is not read"},
		{"service port", "targetPort: http", "targetPort: 80", "targets"},
		{"service selector", "  selector:\n    app.kubernetes.io/name: dlqbot\n  ports:", "  selector:\n    app: dlqbot\n  ports:", "Service's selector"},
		{"listen elsewhere", `value: ":8080"`, `value: ":9000"`, "declares no port"},
		{"secret shipped", "kind: PodDisruptionBudget", "kind: Secret", "Secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(string(good), c.from) {
				t.Fatalf("the manifests lack %q", c.from)
			}
			src := strings.Replace(string(good), c.from, c.to, 1)
			problems := checkKube([]byte(src), uid, drain)
			for _, p := range problems {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Fatalf("no problem mentioning %q; got %v", c.want, problems)
		})
	}
}
