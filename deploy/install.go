package deploy

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

//go:generate go run ./internal/gen

//go:embed install/*.yaml
var installs embed.FS

// Objects returns the objects of install/<name>.yaml ("agent", "webhook",
// "webhook-failover": the webhook with --dead-node-action=out-of-service and
// the `delete pods` right it needs, or "webhook-monitoring": the webhook with
// its PodMonitor, PrometheusRule and dashboard): the kustomization under deploy/ as
// `kubectl kustomize` renders it, embedded in the binary so the demo and the
// test harness install the same RBAC an operator does without linking
// kustomize.
func Objects(name string) ([]*unstructured.Unstructured, error) {
	b, err := installs.ReadFile("install/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("deploy: no rendered manifests for %q: %w", name, err)
	}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []*unstructured.Unstructured
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("deploy: install/%s.yaml: %w", name, err)
		}
		js, err := utilyaml.ToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("deploy: install/%s.yaml: %w", name, err)
		}
		if string(bytes.TrimSpace(js)) == "null" {
			continue // a document of comments only
		}
		// UnmarshalJSON, not json.Unmarshal: numbers must become the int64
		// that unstructured objects hold.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("deploy: install/%s.yaml: %w", name, err)
		}
		out = append(out, u)
	}
}
