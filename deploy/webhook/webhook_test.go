// Package webhook_test checks the webhook's manifests as rendered by kustomize
// (the same renderer as `kubectl kustomize`): the promises admission makes —
// never block a write, answer within the apiserver's patience, read only what
// it needs — hold only if the manifests keep them too. deploy's own test
// creates the rendered objects on a real apiserver with server-side dry run;
// TestOnRealAPIServer here checks what the webhook's own namespace is for.
package webhook_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgequorum/edgequorum/deploy"
	"github.com/edgequorum/edgequorum/deploy/internal/kustomize"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// The webhook's own namespace, and the agents', which holds the zone Leases.
const (
	ns      = "edgequorum-webhook"
	agentNS = "edgequorum-system"
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
		path, resource, failurePolicy string
		ops                           []any
	}{
		"nodes.webhook.edgequorum.io":          {"/mutate/node", "nodes", "Ignore", []any{"UPDATE"}},
		"endpointslices.webhook.edgequorum.io": {"/mutate/endpointslice", "endpointslices", "Ignore", []any{"CREATE", "UPDATE"}},
		"endpoints.webhook.edgequorum.io":      {"/mutate/endpoints", "endpoints", "Ignore", []any{"UPDATE"}},
		"podstatus.webhook.edgequorum.io":      {"/mutate/podstatus", "pods/status", "Ignore", []any{"UPDATE"}},
		// The agents' verdict writes: checked, or not written.
		"nodestatus.webhook.edgequorum.io": {"/mutate/nodestatus", "nodes/status", "Fail", []any{"UPDATE"}},
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
		if h["failurePolicy"] != w.failurePolicy || h["sideEffects"] != "None" || h["timeoutSeconds"] != int64(5) {
			t.Errorf("%s: failurePolicy %v, sideEffects %v, timeoutSeconds %v; want %s, None, 5",
				name, h["failurePolicy"], h["sideEffects"], h["timeoutSeconds"], w.failurePolicy)
		}
		if v, _, _ := unstructured.NestedStringSlice(h, "admissionReviewVersions"); !slices.Equal(v, []string{"v1"}) {
			t.Errorf("%s: admissionReviewVersions %v, want [v1]", name, v)
		}
		svc, _, _ := unstructured.NestedMap(h, "clientConfig", "service")
		if svc["name"] != "edgequorum-webhook" || svc["namespace"] != ns || svc["path"] != w.path || svc["port"] != int64(443) {
			t.Errorf("%s: clientConfig.service %v, want edgequorum-webhook in %s at %s:443", name, svc, ns, w.path)
		}
		// The webhook (or cert-manager) writes it; a manifest that set it
		// would reset it on every kubectl apply.
		if b, ok := h["clientConfig"].(map[string]any)["caBundle"]; ok {
			t.Errorf("%s: the manifest sets caBundle (%v)", name, b)
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
	d := get(t, objs, "Deployment/"+ns+"/edgequorum-webhook")
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
	// Zone Leases are read where the agents write them; the election Lease is
	// kept in the pod's own namespace.
	for _, want := range []string{"--lease-namespace=" + agentNS, "--leader-election-namespace=$(POD_NAMESPACE)"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	env, _, _ := unstructured.NestedSlice(c, "env")
	podNamespace := false
	for _, e := range env {
		e := e.(map[string]any)
		if path, _, _ := unstructured.NestedString(e, "valueFrom", "fieldRef", "fieldPath"); e["name"] == "POD_NAMESPACE" && path == "metadata.namespace" {
			podNamespace = true
		}
	}
	if !podNamespace {
		t.Errorf("env %v lacks POD_NAMESPACE from the downward API (metadata.namespace)", env)
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
	// The pair is read through the API, not mounted: a rotated pair is
	// served as soon as the watch brings it.
	if vols, _, _ := unstructured.NestedSlice(spec, "volumes"); len(vols) != 0 {
		t.Errorf("volumes %v, want none", vols)
	}
	for _, want := range []string{"--tls-secret=edgequorum-webhook-tls", "--manage-certs"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	// With cert-manager, cert-manager keeps the Secret and the caBundle.
	cm := get(t, render(t, "webhook/overlays/cert-manager"), "Deployment/"+ns+"/edgequorum-webhook")
	cmArgs, _, _ := unstructured.NestedStringSlice(cm.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any), "args")
	if slices.Contains(cmArgs, "--manage-certs") || !slices.Contains(cmArgs, "--tls-secret=edgequorum-webhook-tls") {
		t.Errorf("cert-manager overlay args %v: want --tls-secret without --manage-certs", cmArgs)
	}
	pdb := get(t, objs, "PodDisruptionBudget/"+ns+"/edgequorum-webhook")
	if n, _, _ := unstructured.NestedInt64(pdb.Object, "spec", "minAvailable"); n != 1 {
		t.Errorf("PDB minAvailable %d, want 1", n)
	}
	get(t, objs, "Service/"+ns+"/edgequorum-webhook")
	get(t, objs, "ServiceAccount/"+ns+"/edgequorum-webhook")
}

// rule is one right: a verb on a resource (of a name, if any) in a namespace
// ("" for a ClusterRole's rules).
type rule struct{ namespace, group, resource, verb, name string }

// failoverDir is the overlay that turns the failover on, rendered into
// deploy/install/webhook-failover.yaml.
const failoverDir = "webhook/overlays/failover"

// TestRBAC pins down every right the webhook's service account gets, and
// where: reads for the admission path, updates for the repair loop only, Lease
// reads in kube-node-lease and edgequorum-system, and the election lock in the
// webhook's own namespace alone. Deleting pods comes only with the failover
// (components/failover), which needs it to force-delete the pods its taint
// evicted: never from the base or the cert-manager overlay.
func TestRBAC(t *testing.T) {
	failover := []rule{{"", "", "pods", "delete", ""}}
	for _, tt := range []struct {
		dir   string
		extra []rule
		// bindings are the (Cluster)RoleBindings beyond the base's.
		bindings []string
	}{
		{"webhook", nil, nil},
		{"webhook/overlays/cert-manager", nil, nil},
		{failoverDir, failover, []string{"ClusterRoleBinding//edgequorum-webhook-failover"}},
	} {
		t.Run(tt.dir, func(t *testing.T) { checkRBAC(t, render(t, tt.dir), tt.extra, tt.bindings) })
	}
	// What the test harness installs for the failover, and operators
	// without kustomize apply.
	t.Run("install/webhook-failover.yaml", func(t *testing.T) {
		objs, err := deploy.Objects("webhook-failover")
		if err != nil {
			t.Fatal(err)
		}
		byKey := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			byKey[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
		}
		checkRBAC(t, byKey, failover, []string{"ClusterRoleBinding//edgequorum-webhook-failover"})
		role := get(t, byKey, "ClusterRole//edgequorum-webhook-failover")
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		if len(rules) != 1 {
			t.Errorf("ClusterRole edgequorum-webhook-failover has rules %v, want pods delete alone", rules)
		}
	})
}

// checkRBAC checks that objs grant the webhook's ServiceAccount exactly the
// base's rights plus extra, through the base's bindings plus bindings.
func checkRBAC(t *testing.T, objs map[string]*unstructured.Unstructured, extra []rule, moreBindings []string) {
	t.Helper()
	granted := map[rule]bool{}
	collect := func(key string) {
		o := get(t, objs, key)
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
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
							granted[rule{o.GetNamespace(), g.(string), res.(string), v.(string), n}] = true
						}
					}
				}
			}
		}
	}
	// Every Role and ClusterRole rendered, so that a new one cannot slip
	// by, but the agents' (below).
	const agentReads = "Role/" + ns + "/edgequorum-agent-reads"
	for key, o := range objs {
		if (o.GetKind() == "Role" || o.GetKind() == "ClusterRole") && key != agentReads {
			collect(key)
		}
	}
	want := map[rule]bool{}
	const leases = "coordination.k8s.io"
	for _, r := range []rule{
		{"", "", "nodes", "get", ""}, {"", "", "nodes", "list", ""}, {"", "", "nodes", "watch", ""},
		{"", "", "pods", "get", ""}, {"", "", "pods", "list", ""}, {"", "", "pods", "watch", ""},
		{"", "", "nodes", "update", ""},
		{"", "discovery.k8s.io", "endpointslices", "list", ""}, {"", "discovery.k8s.io", "endpointslices", "watch", ""},
		{"", "discovery.k8s.io", "endpointslices", "update", ""},
		{"", "", "endpoints", "list", ""}, {"", "", "endpoints", "watch", ""}, {"", "", "endpoints", "update", ""},
		// handing a kept pod back to not ready: its status, patched
		{"", "", "pods/status", "patch", ""},
		// the zone view: EdgeZones, created, read once per leadership,
		// their status patched, removed with their zone's last node
		{"", "edgequorum.io", "edgezones", "get", ""}, {"", "edgequorum.io", "edgezones", "list", ""},
		{"", "edgequorum.io", "edgezones", "create", ""}, {"", "edgequorum.io", "edgezones", "delete", ""},
		{"", "edgequorum.io", "edgezones/status", "patch", ""},
		// --manage-certs: its own configuration's caBundle, and the one
		// Secret it serves from (created once, by name it cannot be)
		{"", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get", "edgequorum-webhook"},
		{"", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "list", "edgequorum-webhook"},
		{"", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "watch", "edgequorum-webhook"},
		{"", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "update", "edgequorum-webhook"},
		{ns, "", "secrets", "get", "edgequorum-webhook-tls"}, {ns, "", "secrets", "list", "edgequorum-webhook-tls"},
		{ns, "", "secrets", "watch", "edgequorum-webhook-tls"}, {ns, "", "secrets", "update", "edgequorum-webhook-tls"},
		{ns, "", "secrets", "create", ""},
		// kubelet Leases, read
		{"kube-node-lease", leases, "leases", "get", ""}, {"kube-node-lease", leases, "leases", "list", ""},
		{"kube-node-lease", leases, "leases", "watch", ""},
		// zone Leases, read only: nothing the webhook relies on is written
		// where agent credentials may write Leases
		{agentNS, leases, "leases", "get", ""}, {agentNS, leases, "leases", "list", ""},
		{agentNS, leases, "leases", "watch", ""},
		// Events on Nodes, which live in default
		{"default", "events.k8s.io", "events", "create", ""}, {"default", "events.k8s.io", "events", "patch", ""},
		// the election lock, in the webhook's own namespace
		{ns, leases, "leases", "create", ""},
		{ns, leases, "leases", "get", "edgequorum-webhook-repair"},
		{ns, leases, "leases", "update", "edgequorum-webhook-repair"},
		// what each replica reads, told to zone leaders
		{ns, leases, "leases", "get", "edgequorum-webhook-reads"},
		{ns, leases, "leases", "update", "edgequorum-webhook-reads"},
		// the webhook's memory, in its own namespace, where no agent
		// credential writes: read from a cache, written by the repair
		// loop's leader
		{ns, "", "configmaps", "list", ""}, {ns, "", "configmaps", "watch", ""},
		{ns, "", "configmaps", "create", ""}, {ns, "", "configmaps", "update", ""},
	} {
		want[r] = true
	}
	for _, r := range extra {
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
	bindings := 0
	for key, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		bindings++
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		if len(subjects) != 1 {
			t.Errorf("%s binds %v", key, subjects)
			continue
		}
		s := subjects[0].(map[string]any)
		if key == "RoleBinding/"+ns+"/edgequorum-agent-reads" {
			if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); s["kind"] != "ServiceAccount" ||
				s["name"] != "edgequorum-agent" || s["namespace"] != agentNS || ref != "edgequorum-agent-reads" {
				t.Errorf("%s binds %v to %s, want the ServiceAccount edgequorum-agent in %s to edgequorum-agent-reads", key, subjects, ref, agentNS)
			}
			continue
		}
		if s["kind"] != "ServiceAccount" || s["name"] != "edgequorum-webhook" || s["namespace"] != ns {
			t.Errorf("%s binds %v, want the ServiceAccount edgequorum-webhook in %s", key, subjects, ns)
		}
	}
	// The agents may read one Lease here, and do nothing else.
	rules, _, _ := unstructured.NestedSlice(get(t, objs, agentReads).Object, "rules")
	if len(rules) != 1 || fmt.Sprint(rules[0]) != fmt.Sprint(map[string]any{"apiGroups": []any{leases}, "resources": []any{"leases"},
		"resourceNames": []any{"edgequorum-webhook-reads"}, "verbs": []any{"get"}}) {
		t.Errorf("%s grants %v, want get on the Lease edgequorum-webhook-reads alone", agentReads, rules)
	}
	wantBindings := append([]string{"ClusterRoleBinding//edgequorum-webhook", "ClusterRoleBinding//edgequorum-webhook-repair",
		"RoleBinding/kube-node-lease/edgequorum-webhook", "RoleBinding/" + agentNS + "/edgequorum-webhook",
		"RoleBinding/" + ns + "/edgequorum-webhook", "RoleBinding/default/edgequorum-webhook-events",
		"RoleBinding/" + ns + "/edgequorum-agent-reads"}, moreBindings...)
	for _, b := range wantBindings {
		get(t, objs, b)
	}
	if bindings != len(wantBindings) {
		t.Errorf("%d bindings, want %d", bindings, len(wantBindings))
	}
}

// deadNodeAction is the failover's flag as the component sets it.
const deadNodeAction = "--dead-node-action=out-of-service"

// TestFailoverComponent: components/failover is a kustomize Component that
// turns the failover on in the webhook's one container, once, and nothing else
// about the Deployment changes; the base and the cert-manager overlay leave it
// off (the webhook's default, none).
func TestFailoverComponent(t *testing.T) {
	comp, err := os.ReadFile(filepath.Join(kustomize.Dir("webhook/components/failover"), "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(comp), "\nkind: Component\n") {
		t.Error("webhook/components/failover is not a kustomize Component")
	}
	args := func(dir string) []string {
		d := get(t, render(t, dir), "Deployment/"+ns+"/edgequorum-webhook")
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		if len(cs) != 1 {
			t.Fatalf("deploy/%s: %d containers, want 1", dir, len(cs))
		}
		a, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
		return a
	}
	base := args("webhook")
	for _, dir := range []string{"webhook", "webhook/overlays/cert-manager"} {
		for _, a := range args(dir) {
			if strings.HasPrefix(a, "--dead-node-action") {
				t.Errorf("deploy/%s sets %s: the failover must stay opt-in", dir, a)
			}
		}
	}
	if got, want := args(failoverDir), append(slices.Clone(base), deadNodeAction); !slices.Equal(got, want) {
		t.Errorf("deploy/%s args %v, want the base's with %s", failoverDir, got, deadNodeAction)
	}
	// Nothing else differs from the base but the component's RBAC.
	baseObjs, withFailover := render(t, "webhook"), render(t, failoverDir)
	for key, o := range withFailover {
		b, ok := baseObjs[key]
		switch {
		case key == "ClusterRole//edgequorum-webhook-failover" || key == "ClusterRoleBinding//edgequorum-webhook-failover":
			if o.GetLabels()["app.kubernetes.io/name"] != "edgequorum" || o.GetLabels()["app.kubernetes.io/component"] != "webhook" {
				t.Errorf("%s labels %v, want the base's app.kubernetes.io labels", key, o.GetLabels())
			}
		case !ok:
			t.Errorf("deploy/%s adds %s", failoverDir, key)
		case o.GetKind() != "Deployment" && !reflect.DeepEqual(o.Object, b.Object):
			t.Errorf("deploy/%s changes %s", failoverDir, key)
		}
	}
	if len(withFailover) != len(baseObjs)+2 {
		t.Errorf("deploy/%s renders %d objects, want the base's %d and the failover's ClusterRole and binding", failoverDir, len(withFailover), len(baseObjs))
	}
}

// clusterScoped are the kinds deploy/webhook renders without a namespace.
var clusterScoped = map[string]bool{
	"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true, "MutatingWebhookConfiguration": true,
	"CustomResourceDefinition": true,
}

// TestNamespaces: the webhook and everything it owns live in its own
// namespace, which deploy/webhook ships and which enforces the restricted Pod
// Security Standard. The only exceptions are the read-only Roles (and their
// bindings) for the Leases it reads elsewhere, and the Role for the Events it
// records on Nodes (TestRBAC pins its rules).
func TestNamespaces(t *testing.T) {
	elsewhere := map[string]bool{
		"Role/kube-node-lease/edgequorum-webhook":        true,
		"RoleBinding/kube-node-lease/edgequorum-webhook": true,
		"Role/" + agentNS + "/edgequorum-webhook":        true,
		"RoleBinding/" + agentNS + "/edgequorum-webhook": true,
		"Role/default/edgequorum-webhook-events":         true,
		"RoleBinding/default/edgequorum-webhook-events":  true,
	}
	for _, dir := range []string{"webhook", "webhook/overlays/cert-manager", failoverDir} {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			for key, o := range objs {
				switch {
				case clusterScoped[o.GetKind()]:
					if o.GetNamespace() != "" {
						t.Errorf("%s: a cluster-scoped kind with a namespace", key)
					}
				case elsewhere[key]:
				case o.GetNamespace() != ns:
					t.Errorf("%s is not in %s", key, ns)
				}
			}
			for key := range elsewhere {
				get(t, objs, key)
			}
			// Only the read-only Roles leave the webhook's namespace.
			for _, key := range []string{"Role/kube-node-lease/edgequorum-webhook", "Role/" + agentNS + "/edgequorum-webhook"} {
				rules, _, _ := unstructured.NestedSlice(get(t, objs, key).Object, "rules")
				for _, r := range rules {
					verbs, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "verbs")
					for _, v := range verbs {
						if v != "get" && v != "list" && v != "watch" {
							t.Errorf("%s grants %s outside %s", key, v, ns)
						}
					}
				}
			}

			namespace := get(t, objs, "Namespace//"+ns)
			labels := namespace.GetLabels()
			for k, v := range map[string]string{
				"pod-security.kubernetes.io/enforce":         "restricted",
				"pod-security.kubernetes.io/enforce-version": "latest",
				"pod-security.kubernetes.io/audit":           "restricted",
				"pod-security.kubernetes.io/warn":            "restricted",
			} {
				if labels[k] != v {
					t.Errorf("Namespace %s: label %s = %q, want %q", ns, k, labels[k], v)
				}
			}
			for key, o := range objs {
				if o.GetKind() == "Namespace" && o.GetName() != ns {
					t.Errorf("deploy/%s ships %s; edgequorum-system belongs to deploy/agent", dir, key)
				}
			}
		})
	}
}

func TestCertManagerOverlay(t *testing.T) {
	objs := render(t, "webhook/overlays/cert-manager")
	mwc := get(t, objs, "MutatingWebhookConfiguration//edgequorum-webhook")
	if got := mwc.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != ns+"/edgequorum-webhook" {
		t.Errorf("inject-ca-from = %q, want %s/edgequorum-webhook", got, ns)
	}
	cert := get(t, objs, "Certificate/"+ns+"/edgequorum-webhook")
	if s, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); s != "edgequorum-webhook-tls" {
		t.Errorf("Certificate writes %q, the Deployment mounts edgequorum-webhook-tls", s)
	}
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if !slices.Contains(dns, "edgequorum-webhook."+ns+".svc") {
		t.Errorf("dnsNames %v lack the Service name the apiserver dials", dns)
	}
	get(t, objs, "Issuer/"+ns+"/edgequorum-ca")
	get(t, objs, "Deployment/"+ns+"/edgequorum-webhook")
}

// TestOnRealAPIServer installs deploy/agent (less its DaemonSet) and
// deploy/webhook (less its Deployment) on a real apiserver and checks what the
// namespace split is for: the webhook's pod is admitted under the restricted
// Pod Security Standard its namespace enforces (and a host-network pod is
// not), and only the webhook, not an agent, may write its election Lease,
// while the webhook may only read Leases where agents write them.
func TestOnRealAPIServer(t *testing.T) {
	testcluster.RequireBinaries(t)
	c := testcluster.StartT(t, testcluster.Options{})
	ctx := context.Background()

	var install []*unstructured.Unstructured
	var template map[string]any
	for _, dir := range []string{"agent", "webhook"} {
		objs, err := kustomize.Render(kustomize.Dir(dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			switch o.GetKind() {
			case "DaemonSet":
			case "Deployment":
				template, _, _ = unstructured.NestedMap(o.Object, "spec", "template")
			default:
				install = append(install, o)
			}
		}
	}
	if template == nil {
		t.Fatal("deploy/webhook renders no Deployment")
	}
	if err := deploy.Apply(ctx, c.RESTConfig(), install, false); err != nil {
		t.Fatal(err)
	}

	t.Run("restricted", func(t *testing.T) {
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(template, pod); err != nil {
			t.Fatal(err)
		}
		pod.Namespace, pod.Name = ns, "edgequorum-webhook-dry-run"
		dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		if _, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, dryRun); err != nil {
			t.Errorf("the Deployment's pod is not admitted in %s: %v", ns, err)
		}
		pod.Spec.HostNetwork = true
		_, err := c.Client().CoreV1().Pods(ns).Create(ctx, pod, dryRun)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
			t.Errorf("a host-network pod in %s: %v, want forbidden by PodSecurity", ns, err)
		}
	})

	// Deleting pods is the failover's alone: not granted by the base, granted
	// once components/failover is applied on top.
	t.Run("failover", func(t *testing.T) {
		deletePods := func() bool {
			t.Helper()
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               "system:serviceaccount:" + ns + ":edgequorum-webhook",
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "default", Verb: "delete", Resource: "pods", Name: "web-0"},
			}}
			got, err := c.Client().AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return got.Status.Allowed
		}
		if deletePods() {
			t.Fatal("deploy/webhook lets the webhook delete pods; only components/failover may")
		}
		var rbac []*unstructured.Unstructured
		for _, o := range render(t, failoverDir) {
			if o.GetName() == "edgequorum-webhook-failover" {
				rbac = append(rbac, o)
			}
		}
		if len(rbac) != 2 {
			t.Fatalf("deploy/%s renders %d objects named edgequorum-webhook-failover, want its ClusterRole and binding", failoverDir, len(rbac))
		}
		if err := deploy.Apply(ctx, c.RESTConfig(), rbac, false); err != nil {
			t.Fatal(err)
		}
		// The authorizer's RBAC cache follows the apiserver's watch.
		poll.UntilTrue(t, 30*time.Second, "delete pods granted by components/failover", deletePods)
	})

	t.Run("leases", func(t *testing.T) {
		webhook := []string{"system:serviceaccount:" + ns + ":edgequorum-webhook", "system:serviceaccounts:" + ns}
		agent := []string{"system:serviceaccount:" + agentNS + ":edgequorum-agent", "system:serviceaccounts:" + agentNS}
		const lock = "edgequorum-webhook-repair"
		for _, tt := range []struct {
			who                   []string
			namespace, verb, name string
			allowed               bool
		}{
			{webhook, ns, "create", "", true},
			{webhook, ns, "get", lock, true},
			{webhook, ns, "update", lock, true},
			{webhook, ns, "update", "another-lease", false},
			{webhook, agentNS, "get", "edgequorum-zone-a", true},
			{webhook, agentNS, "list", "", true},
			{webhook, agentNS, "watch", "", true},
			{webhook, agentNS, "create", "", false},
			{webhook, agentNS, "update", lock, false},
			{webhook, "kube-node-lease", "list", "", true},
			{webhook, "kube-node-lease", "update", "edge-a1", false},
			{agent, agentNS, "update", "edgequorum-zone-a", true},
			{agent, ns, "create", "", false},
			{agent, ns, "update", lock, false},
			{agent, ns, "delete", lock, false},
		} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   tt.who[0],
				Groups: []string{"system:serviceaccounts", tt.who[1], "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: tt.namespace, Verb: tt.verb, Group: "coordination.k8s.io", Resource: "leases", Name: tt.name,
				},
			}}
			got, err := c.Client().AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Allowed != tt.allowed {
				t.Errorf("%s %s lease %q in %s: allowed %v, want %v (%s)",
					tt.who[0], tt.verb, tt.name, tt.namespace, got.Status.Allowed, tt.allowed, got.Status.Reason)
			}
		}
	})
}
