package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The Kubernetes objects' fields the checks read. Each document is decoded
// strictly: a field these types do not know (a typo such as readinesProbe)
// is an error; add the field here when the Kubernetes API has it.
type (
	kMeta struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	}
	kSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	kSecurity struct {
		RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
		RunAsUser                *int64 `yaml:"runAsUser"`
		RunAsGroup               *int64 `yaml:"runAsGroup"`
		AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
		SeccompProfile           *struct {
			Type string `yaml:"type"`
		} `yaml:"seccompProfile"`
		Capabilities *struct {
			Drop []string `yaml:"drop"`
			Add  []string `yaml:"add"`
		} `yaml:"capabilities"`
	}
	kProbe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
		InitialDelaySeconds int `yaml:"initialDelaySeconds"`
		PeriodSeconds       int `yaml:"periodSeconds"`
		TimeoutSeconds      int `yaml:"timeoutSeconds"`
		FailureThreshold    int `yaml:"failureThreshold"`
	}
	kKeyRef struct {
		Name     string `yaml:"name"`
		Key      string `yaml:"key"`
		Optional bool   `yaml:"optional"`
	}
	kEnv struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef    *kKeyRef `yaml:"secretKeyRef"`
			ConfigMapKeyRef *kKeyRef `yaml:"configMapKeyRef"`
		} `yaml:"valueFrom"`
	}
	kRef struct {
		Name     string `yaml:"name"`
		Optional bool   `yaml:"optional"`
	}
	kContainer struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Ports   []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env     []kEnv `yaml:"env"`
		EnvFrom []struct {
			ConfigMapRef *kRef `yaml:"configMapRef"`
			SecretRef    *kRef `yaml:"secretRef"`
		} `yaml:"envFrom"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
		ReadinessProbe *kProbe `yaml:"readinessProbe"`
		LivenessProbe  *kProbe `yaml:"livenessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext *kSecurity `yaml:"securityContext"`
	}
	kDeployment struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   kMeta  `yaml:"metadata"`
		Spec       struct {
			Replicas *int      `yaml:"replicas"`
			Selector kSelector `yaml:"selector"`
			Strategy struct {
				Type          string `yaml:"type"`
				RollingUpdate *struct {
					MaxSurge       any `yaml:"maxSurge"`
					MaxUnavailable any `yaml:"maxUnavailable"`
				} `yaml:"rollingUpdate"`
			} `yaml:"strategy"`
			Template struct {
				Metadata kMeta `yaml:"metadata"`
				Spec     struct {
					TerminationGracePeriodSeconds *int       `yaml:"terminationGracePeriodSeconds"`
					AutomountServiceAccountToken  *bool      `yaml:"automountServiceAccountToken"`
					SecurityContext               *kSecurity `yaml:"securityContext"`
					TopologySpreadConstraints     []struct {
						MaxSkew           int       `yaml:"maxSkew"`
						TopologyKey       string    `yaml:"topologyKey"`
						WhenUnsatisfiable string    `yaml:"whenUnsatisfiable"`
						LabelSelector     kSelector `yaml:"labelSelector"`
					} `yaml:"topologySpreadConstraints"`
					Containers []kContainer `yaml:"containers"`
					Volumes    []struct {
						Name      string `yaml:"name"`
						ConfigMap *kRef  `yaml:"configMap"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	kService struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   kMeta  `yaml:"metadata"`
		Spec       struct {
			Type     string            `yaml:"type"`
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Name       string `yaml:"name"`
				Port       int    `yaml:"port"`
				TargetPort any    `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	kPDB struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   kMeta  `yaml:"metadata"`
		Spec       struct {
			MinAvailable   any       `yaml:"minAvailable"`
			MaxUnavailable any       `yaml:"maxUnavailable"`
			Selector       kSelector `yaml:"selector"`
		} `yaml:"spec"`
	}
)

// splitDocs splits a YAML stream into its non-empty documents.
func splitDocs(stream []byte) ([][]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(stream))
	var docs [][]byte
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(n.Content) == 0 {
			continue
		}
		b, err := yaml.Marshal(&n)
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
	}
}

// readKustomization is what `kubectl apply -k dir` applies when the
// kustomization only lists resources: their documents, in order. It
// refuses any other kustomization field, which it could not apply.
func readKustomization(dir string) ([]byte, error) {
	src, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Resources  []string `yaml:"resources"`
	}
	if err := decodeStrict(src, &k); err != nil {
		return nil, fmt.Errorf("kustomization.yaml uses more than resources, which this test cannot apply without kubectl or kustomize: %w", err)
	}
	if k.Kind != "Kustomization" || len(k.Resources) == 0 {
		return nil, fmt.Errorf("kustomization.yaml: kind %q with %d resources", k.Kind, len(k.Resources))
	}
	var out bytes.Buffer
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			return nil, fmt.Errorf("kustomization.yaml lists %s: %w", r, err)
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes(), nil
}

// renderKustomization runs `kubectl kustomize` or `kustomize build` on dir,
// whichever is installed; with neither it returns nil and "".
func renderKustomization(ctx context.Context, dir string) ([]byte, string, error) {
	var cmd []string
	if _, err := exec.LookPath("kubectl"); err == nil {
		cmd = []string{"kubectl", "kustomize", dir}
	} else if _, err := exec.LookPath("kustomize"); err == nil {
		cmd = []string{"kustomize", "build", dir}
	} else {
		return nil, "", nil
	}
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v\n%s", strings.Join(cmd, " "), err, stderr.String())
	}
	return out, strings.Join(cmd, " "), nil
}

// byKindName reads a stream's documents loosely, keyed by kind/name, to
// compare two renderings.
func byKindName(stream []byte) (map[string]map[string]any, error) {
	docs, err := splitDocs(stream)
	if err != nil {
		return nil, err
	}
	objs := map[string]map[string]any{}
	for _, d := range docs {
		var o map[string]any
		if err := yaml.Unmarshal(d, &o); err != nil {
			return nil, err
		}
		meta, _ := o["metadata"].(map[string]any)
		objs[fmt.Sprintf("%v/%v", o["kind"], meta["name"])] = o
	}
	return objs, nil
}

// dockerfileUser is the numeric user the image runs as (its final stage's
// USER), so the manifests run the same user.
func dockerfileUser(t *testing.T) int64 {
	t.Helper()
	stages, err := parseDockerfile(string(readRepoFile(t, "Dockerfile")))
	if err != nil || len(stages) == 0 {
		t.Fatalf("Dockerfile: %v", err)
	}
	var uid int64 = -1
	for _, in := range stages[len(stages)-1].body {
		if in.cmd == "USER" {
			u, _, _ := strings.Cut(in.args, ":")
			if _, err := fmt.Sscan(u, &uid); err != nil {
				t.Fatalf("Dockerfile: USER %s is not numeric", in.args)
			}
		}
	}
	if uid <= 0 {
		t.Fatal("Dockerfile: the final stage runs as root")
	}
	return uid
}

// TestKubernetesManifests renders deploy/k8s as `kubectl apply -k` would
// and checks every object it produces.
func TestKubernetesManifests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	listed, err := readKustomization("k8s")
	if err != nil {
		t.Fatal(err)
	}
	rendered, how, err := renderKustomization(ctx, "k8s")
	if err != nil {
		t.Fatal(err)
	}
	stream := listed
	if rendered == nil {
		t.Log("neither kubectl nor kustomize is installed: checking the files kustomization.yaml lists")
	} else {
		stream = rendered
		// The files as listed are what kustomize renders: nothing is
		// patched or generated behind the reader's back.
		a, errA := byKindName(rendered)
		b, errB := byKindName(listed)
		if errA != nil || errB != nil {
			t.Fatalf("cannot read the documents: %v %v", errA, errB)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s renders other objects than the files kustomization.yaml lists", how)
		}
	}
	drain, _, err := drainBound()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkKube(stream, dockerfileUser(t), drain) {
		t.Error(p)
	}
}

// TestDocsSayHowToApply checks that the Kubernetes and Compose instructions
// (docs/operating.md "Docker Compose and Kubernetes") match the files: the
// apply command, and a Secret holding every key the Deployment requires.
func TestDocsSayHowToApply(t *testing.T) {
	readme := string(readRepoFile(t, "docs/operating.md"))
	for _, want := range []string{"kubectl apply -k deploy/k8s", "docker compose up", "docker-compose config"} {
		if !strings.Contains(readme, want) {
			t.Errorf("docs/operating.md does not say %q", want)
		}
	}
	stream, err := readKustomization("k8s")
	if err != nil {
		t.Fatal(err)
	}
	_, required := secretKeys(stream)
	for _, k := range required {
		if !strings.Contains(readme, "--from-literal="+k+"=") {
			t.Errorf("docs/operating.md's kubectl create secret does not set %s, which the Deployment requires", k)
		}
	}
}

// secretKeys lists the Secret keys the Deployment reads, and those it
// cannot start without.
func secretKeys(stream []byte) (all, required []string) {
	docs, _ := splitDocs(stream)
	for _, d := range docs {
		var dep kDeployment
		if yaml.Unmarshal(d, &dep) != nil || dep.Kind != "Deployment" {
			continue
		}
		for _, c := range dep.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					all = append(all, e.ValueFrom.SecretKeyRef.Key)
					if !e.ValueFrom.SecretKeyRef.Optional {
						required = append(required, e.ValueFrom.SecretKeyRef.Key)
					}
				}
			}
		}
	}
	return slices.Compact(all), slices.Compact(required)
}
