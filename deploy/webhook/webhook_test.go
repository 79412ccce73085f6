// Package webhook_test checks the webhook's manifests as rendered by kustomize
// (the same renderer as `kubectl kustomize`): the promises admission makes —
// never block a write, answer within the apiserver's patience, read only what
// it needs — hold only if the manifests keep them too. deploy's own test
// creates the rendered objects on a real apiserver with server-side dry run.
package webhook_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/edgequorum/edgequorum/deploy/internal/kustomize"
)

func render(t *testing.T, dir string) map[string]*unstructured.Unstructured {
	t.Helper()
	objs, err := kustomize.Render(kustomize.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return out
}

func get(t *testing.T, objs map[string]*unstructured.Unstructured, key string) *unstructured.Unstructured {
	t.Helper()
	o := objs[key]
	if o == nil {
		t.Fatalf("rendered manifests lack %s", key)
	}
	return o
}

func TestWebhookConfiguration(t *testing.T) {
	objs := render(t, "webhook")
	mwc := get(t, objs, "MutatingWebhookConfiguration//edgequorum-webhook")
	hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
	want := map[string]struct {
		path, resource string
		ops            []any
	}{
		"nodes.webhook.edgequorum.io":          {"/mutate/node", "nodes", []any{"UPDATE"}},
		"endpointslices.webhook.edgequorum.io": {"/mutate/endpointslice", "endpointslices", []any{"CREATE", "UPDATE"}},
		"endpoints.webhook.edgequorum.io":      {"/mutate/endpoints", "endpoints", []any{"UPDATE"}},
	}
	if len(hooks) != len(want) {
		t.Fatalf("%d webhooks, want %d", len(hooks), len(want))
	}
	for _, h := range hooks {
		h := h.(map[string]any)
		name, _ := h["name"].(string)
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected webhook %q", name)
			continue
		}
		if h["failurePolicy"] != "Ignore" || h["sideEffects"] != "None" || h["timeoutSeconds"] != int64(5) {
			t.Errorf("%s: failurePolicy %v, sideEffects %v, timeoutSeconds %v; want Ignore, None, 5",
				name, h["failurePolicy"], h["sideEffects"], h["timeoutSeconds"])
		}
		if v, _, _ := unstructured.NestedStringSlice(h, "admissionReviewVersions"); !slices.Equal(v, []string{"v1"}) {
			t.Errorf("%s: admissionReviewVersions %v, want [v1]", name, v)
		}
		svc, _, _ := unstructured.NestedMap(h, "clientConfig", "service")
		if svc["name"] != "edgequorum-webhook" || svc["namespace"] != "edgequorum-system" || svc["path"] != w.path || svc["port"] != int64(443) {
			t.Errorf("%s: clientConfig.service %v, want edgequorum-webhook in edgequorum-system at %s:443", name, svc, w.path)
		}
		if _, ok := h["clientConfig"].(map[string]any)["caBundle"]; !ok {
			t.Errorf("%s: no caBundle placeholder", name)
		}
		rules, _, _ := unstructured.NestedSlice(h, "rules")
		if len(rules) != 1 {
			t.Fatalf("%s: %d rules, want 1", name, len(rules))
		}
		r := rules[0].(map[string]any)
		if !slices.Equal(r["operations"].([]any), w.ops) || !slices.Equal(r["resources"].([]any), []any{w.resource}) {
			t.Errorf("%s: rule %v, want %v on %s", name, r, w.ops, w.resource)
		}
	}
}

func TestDeployment(t *testing.T) {
	objs := render(t, "webhook")
	d := get(t, objs, "Deployment/edgequorum-system/edgequorum-webhook")
	if n, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); n != 2 {
		t.Errorf("replicas %d, want 2", n)
	}
	spec, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	if spec["serviceAccountName"] != "edgequorum-webhook" {
		t.Errorf("serviceAccountName %v", spec["serviceAccountName"])
	}
	anti, _, _ := unstructured.NestedSlice(spec, "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
	if len(anti) != 1 || anti[0].(map[string]any)["podAffinityTerm"].(map[string]any)["topologyKey"] != "kubernetes.io/hostname" {
		t.Errorf("pod anti-affinity on the host name missing: %v", anti)
	}
	containers, _, _ := unstructured.NestedSlice(spec, "containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	c := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	if len(args) == 0 || args[0] != "webhook" {
		t.Errorf("args %v do not run `edgequorum webhook`", args)
	}
	for _, probe := range []struct{ name, path string }{{"readinessProbe", "/readyz"}, {"livenessProbe", "/healthz"}} {
		get, _, _ := unstructured.NestedStringMap(c, probe.name, "httpGet")
		if get["path"] != probe.path || get["scheme"] != "HTTPS" {
			t.Errorf("%s: %v, want HTTPS %s", probe.name, get, probe.path)
		}
	}
	sc, _, _ := unstructured.NestedMap(c, "securityContext")
	if sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false || sc["runAsNonRoot"] != true {
		t.Errorf("container securityContext %v", sc)
	}
	for _, r := range []string{"requests", "limits"} {
		if m, _, _ := unstructured.NestedStringMap(c, "resources", r); m["memory"] == "" || m["cpu"] == "" {
			t.Errorf("resources.%s %v lacks cpu or memory", r, m)
		}
	}
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	if len(vols) != 1 || vols[0].(map[string]any)["secret"].(map[string]any)["secretName"] != "edgequorum-webhook-tls" {
		t.Errorf("volumes %v, want the Secret edgequorum-webhook-tls", vols)
	}
	pdb := get(t, objs, "PodDisruptionBudget/edgequorum-system/edgequorum-webhook")
	if n, _, _ := unstructured.NestedInt64(pdb.Object, "spec", "minAvailable"); n != 1 {
		t.Errorf("PDB minAvailable %d, want 1", n)
	}
	get(t, objs, "Service/edgequorum-system/edgequorum-webhook")
	get(t, objs, "ServiceAccount/edgequorum-system/edgequorum-webhook")
}

// TestRBAC pins down every right the webhook's service account gets: reads for
// the admission path, updates for the repair loop only, Leases in two
// namespaces only.
func TestRBAC(t *testing.T) {
	objs := render(t, "webhook")
	type rule struct{ group, resource, verb, name string }
	granted := map[rule]bool{}
	collect := func(key string) {
		rules, _, _ := unstructured.NestedSlice(get(t, objs, key).Object, "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			names, _, _ := unstructured.NestedStringSlice(r, "resourceNames")
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range r["apiGroups"].([]any) {
				for _, res := range r["resources"].([]any) {
					for _, v := range r["verbs"].([]any) {
						for _, n := range names {
							granted[rule{g.(string), res.(string), v.(string), n}] = true
						}
					}
				}
			}
		}
	}
	collect("ClusterRole//edgequorum-webhook")
	collect("ClusterRole//edgequorum-webhook-repair")
	collect("Role/kube-node-lease/edgequorum-webhook")
	collect("Role/edgequorum-system/edgequorum-webhook")
	want := map[rule]bool{}
	for _, r := range []rule{
		{"", "nodes", "get", ""}, {"", "nodes", "list", ""}, {"", "nodes", "watch", ""},
		{"", "pods", "get", ""}, {"", "pods", "list", ""}, {"", "pods", "watch", ""},
		{"", "nodes", "update", ""},
		{"discovery.k8s.io", "endpointslices", "list", ""}, {"discovery.k8s.io", "endpointslices", "watch", ""},
		{"discovery.k8s.io", "endpointslices", "update", ""},
		{"", "endpoints", "list", ""}, {"", "endpoints", "watch", ""}, {"", "endpoints", "update", ""},
		// kube-node-lease and edgequorum-system, read
		{"coordination.k8s.io", "leases", "get", ""}, {"coordination.k8s.io", "leases", "list", ""},
		{"coordination.k8s.io", "leases", "watch", ""},
		// the election lock
		{"coordination.k8s.io", "leases", "create", ""},
		{"coordination.k8s.io", "leases", "update", "edgequorum-webhook-repair"},
	} {
		want[r] = true
	}
	for r := range granted {
		if !want[r] {
			t.Errorf("granted %+v, which the webhook does not need", r)
		}
	}
	for r := range want {
		if !granted[r] {
			t.Errorf("missing %+v", r)
		}
	}
	for _, b := range []string{"ClusterRoleBinding//edgequorum-webhook", "ClusterRoleBinding//edgequorum-webhook-repair",
		"RoleBinding/kube-node-lease/edgequorum-webhook", "RoleBinding/edgequorum-system/edgequorum-webhook"} {
		subjects, _, _ := unstructured.NestedSlice(get(t, objs, b).Object, "subjects")
		s := subjects[0].(map[string]any)
		if len(subjects) != 1 || s["name"] != "edgequorum-webhook" || s["namespace"] != "edgequorum-system" {
			t.Errorf("%s binds %v", b, subjects)
		}
	}
}

func TestCertManagerOverlay(t *testing.T) {
	objs := render(t, "webhook/overlays/cert-manager")
	mwc := get(t, objs, "MutatingWebhookConfiguration//edgequorum-webhook")
	if got := mwc.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "edgequorum-system/edgequorum-webhook" {
		t.Errorf("inject-ca-from = %q", got)
	}
	cert := get(t, objs, "Certificate/edgequorum-system/edgequorum-webhook")
	if s, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); s != "edgequorum-webhook-tls" {
		t.Errorf("Certificate writes %q, the Deployment mounts edgequorum-webhook-tls", s)
	}
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if !slices.Contains(dns, "edgequorum-webhook.edgequorum-system.svc") {
		t.Errorf("dnsNames %v lack the Service name the apiserver dials", dns)
	}
	get(t, objs, "Issuer/edgequorum-system/edgequorum-ca")
	get(t, objs, "Deployment/edgequorum-system/edgequorum-webhook")
}
