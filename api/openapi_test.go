package api

import (
	"os"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestOpenAPICoversRoutes keeps api/openapi.yaml in step with the routes
// the handler serves and the error codes it returns.
func TestOpenAPICoversRoutes(t *testing.T) {
	data, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI    string                               `yaml:"openapi"`
		Paths      map[string]map[string]map[string]any `yaml:"paths"`
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Code struct {
							Enum []string `yaml:"enum"`
						} `yaml:"code"`
					} `yaml:"properties"`
				} `yaml:"Error"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi version %q", doc.OpenAPI)
	}
	h := &handler{}
	documented := 0
	for _, rt := range h.routes() {
		op, ok := doc.Paths[rt.path][strings.ToLower(rt.method)]
		if !ok {
			t.Errorf("%s %s is not in openapi.yaml", rt.method, rt.path)
			continue
		}
		if op["operationId"] == nil || op["responses"] == nil {
			t.Errorf("%s %s lacks operationId or responses", rt.method, rt.path)
		}
		documented++
	}
	ops := 0
	for _, p := range doc.Paths {
		ops += len(p)
	}
	if ops != documented {
		t.Errorf("openapi.yaml documents %d operations, the handler serves %d", ops, documented)
	}
	codes := doc.Components.Schemas.Error.Properties.Code.Enum
	src, _ := os.ReadFile("errors.go")
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "Code") || !strings.Contains(line, `= "`) {
			continue
		}
		code := strings.Split(strings.Split(line, `"`)[1], `"`)[0]
		found := false
		for _, c := range codes {
			found = found || c == code
		}
		if !found {
			t.Errorf("error code %q is not in openapi.yaml", code)
		}
	}
}
