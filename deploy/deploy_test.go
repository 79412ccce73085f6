package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/edgequorum/edgequorum/deploy/internal/kustomize"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

func kinds(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.GetKind()+"/"+o.GetName()] = o
	}
	return out
}

func TestAgentManifestRenders(t *testing.T) {
	objs, err := kustomize.Render(kustomize.Dir("agent"))
	if err != nil {
		t.Fatal(err)
	}
	k := kinds(objs)
	for _, want := range []string{"Namespace/edgequorum-system", "ServiceAccount/edgequorum-agent",
		"ClusterRole/edgequorum-agent", "ClusterRoleBinding/edgequorum-agent", "Role/edgequorum-agent",
		"RoleBinding/edgequorum-agent", "DaemonSet/edgequorum-agent",
		"ValidatingAdmissionPolicy/edgequorum-verdict-writer", "ValidatingAdmissionPolicyBinding/edgequorum-verdict-writer",
		"ValidatingAdmissionPolicy/edgequorum-node-key-writer", "ValidatingAdmissionPolicyBinding/edgequorum-node-key-writer",
		"ValidatingAdmissionPolicy/" + nodeWritesPolicy, "ValidatingAdmissionPolicyBinding/" + nodeWritesPolicy,
		"ValidatingAdmissionPolicy/" + leaseWritesPolicy, "ValidatingAdmissionPolicyBinding/" + leaseWritesPolicy} {
		if k[want] == nil {
			t.Errorf("rendered agent lacks %s", want)
		}
	}
	ds := k["DaemonSet/edgequorum-agent"]
	if ds == nil {
		t.FailNow()
	}
	spec, _, _ := unstructured.NestedMap(ds.Object, "spec", "template", "spec")
	if spec["hostNetwork"] != true || spec["priorityClassName"] != "system-node-critical" {
		t.Errorf("DaemonSet pod spec: hostNetwork=%v priority=%v", spec["hostNetwork"], spec["priorityClassName"])
	}
	tol, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "tolerations")
	if len(tol) != 1 || tol[0].(map[string]any)["operator"] != "Exists" {
		t.Errorf("DaemonSet must tolerate every taint, has %v", tol)
	}
	vols, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "volumes")
	foundState := false
	for _, v := range vols {
		hp, ok := v.(map[string]any)["hostPath"].(map[string]any)
		if ok && hp["path"] == "/var/lib/edgequorum" && hp["type"] == "DirectoryOrCreate" {
			foundState = true
		}
	}
	if !foundState {
		t.Error("DaemonSet lacks the hostPath /var/lib/edgequorum DirectoryOrCreate volume")
	}
	rules, _, _ := unstructured.NestedSlice(k["ClusterRole/edgequorum-agent"].Object, "rules")
	var got []string
	for _, r := range rules {
		r := r.(map[string]any)
		got = append(got, fmt.Sprint(r["apiGroups"], r["resources"], r["verbs"]))
	}
	want := []string{"[] [nodes] [get list watch patch]", "[] [nodes/status] [patch]", "[authentication.k8s.io] [selfsubjectreviews] [create]", "[events.k8s.io] [events] [create]"}
	if !slices.Equal(got, want) {
		t.Errorf("agent ClusterRole rules %v, want %v (nodes, their status, the health check, Events)", got, want)
	}
}

// TestManifestsServerSideDryRun creates every rendered object on a real
// apiserver with server-side dry run, so schema errors surface here rather than
// at an operator's `kubectl apply`.
func TestManifestsServerSideDryRun(t *testing.T) {
	testcluster.RequireBinaries(t)
	c := testcluster.StartT(t, testcluster.Options{})
	ctx := context.Background()
	for _, dir := range []string{"agent", "webhook", "webhook/overlays/failover"} {
		objs, err := kustomize.Render(kustomize.Dir(dir))
		if err != nil {
			t.Fatal(err)
		}
		// The namespace must exist for namespaced objects to be dry-run.
		var ns, rest []*unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				ns = append(ns, o)
			} else {
				rest = append(rest, o)
			}
		}
		if err := Apply(ctx, c.RESTConfig(), ns, false); err != nil {
			t.Fatal(err)
		}
		if err := Apply(ctx, c.RESTConfig(), rest, true); err != nil {
			t.Fatalf("deploy/%s: %v", dir, err)
		}
		t.Logf("deploy/%s: %d objects pass server-side dry run", dir, len(objs))
	}
}

// TestInstallFilesUpToDate keeps install/*.yaml, which the demo and the test
// harness embed and operators may apply, equal to what kustomize renders now:
// every one of kustomize.Installs (webhook-failover.yaml and
// webhook-monitoring.yaml from their overlays included), and no other file.
func TestInstallFilesUpToDate(t *testing.T) {
	for _, in := range kustomize.Installs {
		name := in.Name
		rendered, err := kustomize.YAML(kustomize.Dir(in.Dir))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(kustomize.Dir("install"), name+".yaml")
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, kustomize.InstallFile(in, rendered)) {
			t.Errorf("%s is stale: run `go generate ./deploy` and commit it", path)
			continue
		}
		objs, err := Objects(name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := kustomize.Render(kustomize.Dir(in.Dir))
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != len(want) {
			t.Fatalf("Objects(%q) has %d objects, kustomize renders %d", name, len(objs), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(objs[i].Object, want[i].Object) {
				t.Errorf("Objects(%q)[%d] %s/%s differs from kustomize's", name, i, want[i].GetKind(), want[i].GetName())
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(kustomize.Dir("install"), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if !slices.ContainsFunc(kustomize.Installs, func(in kustomize.Install) bool { return in.Name == name }) {
			t.Errorf("%s is rendered from no kustomization in kustomize.Installs: remove it or add it there", f)
		}
	}
}

// TestManifestsNameTheRelease keeps every shipped container on the exact image
// `make image` builds (VERSION), pulled only if absent: an agent that restarts
// during a WAN cut cannot reach a registry.
func TestManifestsNameTheRelease(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	want := "ghcr.io/edgequorum/edgequorum:" + strings.TrimSpace(string(raw))
	for _, in := range kustomize.Installs {
		name := in.Name
		objs, err := Objects(name)
		if err != nil {
			t.Fatal(err)
		}
		containers := 0
		for _, o := range objs {
			pod, found, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
			if !found {
				continue
			}
			sc, _, _ := unstructured.NestedString(pod, "securityContext", "seccompProfile", "type")
			if sc != "RuntimeDefault" {
				t.Errorf("%s %s/%s: pod seccompProfile %q, want RuntimeDefault", name, o.GetKind(), o.GetName(), sc)
			}
			cs, _, _ := unstructured.NestedSlice(pod, "containers")
			for _, c := range cs {
				c := c.(map[string]any)
				containers++
				if c["image"] != want || c["imagePullPolicy"] != "IfNotPresent" {
					t.Errorf("%s %s/%s container %v: image %v pull %v; want %s IfNotPresent",
						name, o.GetKind(), o.GetName(), c["name"], c["image"], c["imagePullPolicy"], want)
				}
			}
		}
		if containers == 0 {
			t.Errorf("install/%s.yaml has no containers", name)
		}
	}
}

// TestAgentNamespaceAdmitsTheAgent: the agent's hostNetwork and hostPath need
// the privileged Pod Security level, and its system-node-critical priority a
// quota covering that class where clusters limit it to kube-system.
func TestAgentNamespaceAdmitsTheAgent(t *testing.T) {
	objs, err := Objects("agent")
	if err != nil {
		t.Fatal(err)
	}
	k := kinds(objs)
	ns := k["Namespace/edgequorum-system"]
	if ns == nil || ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Fatalf("Namespace edgequorum-system must enforce privileged, has %v", ns)
	}
	q := k["ResourceQuota/edgequorum-critical-pods"]
	if q == nil {
		t.Fatal("no ResourceQuota for system-node-critical pods")
	}
	exprs, _, _ := unstructured.NestedSlice(q.Object, "spec", "scopeSelector", "matchExpressions")
	if len(exprs) != 1 || fmt.Sprint(exprs[0].(map[string]any)["values"]) != "[system-node-critical]" {
		t.Errorf("quota scope %v, want PriorityClass In [system-node-critical]", exprs)
	}
}
