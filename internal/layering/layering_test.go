package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/edgequorum/edgequorum/"

// deps lists every package pkgs depend on, themselves included.
func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	args := []string{"list", "-deps"}
	for _, p := range pkgs {
		args = append(args, module+p)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}

// TestLayering checks the rules of DESIGN.md's "Layout": the shared
// vocabulary and the store carry no Kubernetes, the cloud webhook carries
// nothing of the edge agent, and the agent no clientset of every API group.
func TestLayering(t *testing.T) {
	for _, rule := range []struct {
		pkgs   []string
		banned []string
		why    string
	}{
		{[]string{"zone", "store", "probe"}, []string{"k8s.io/"}, "zone, store and probe are leaves without Kubernetes"},
		{[]string{"raftzone"}, []string{"k8s.io/client-go", "k8s.io/api/"}, "raftzone talks to no apiserver"},
		{[]string{"raftzone"}, []string{module + "probe"}, "the member decides on reports, not on how probes run"},
		{[]string{"probe"}, []string{module + "raftzone", module + "zonekeys"}, "probes say what this node sees, nothing of the zone"},
		{[]string{"zoneport"}, []string{module + "raftzone", module + "store", module + "probe"}, "the zone port knows its member through zoneport.Member only"},
		{[]string{"admission"}, []string{module + "apiwriter", module + "raftzone", module + "agent", module + "store"},
			"the webhook imports nothing of the edge agent"},
		{[]string{"agent", "apiwriter", "internal/kubeclient", "internal/cli", "internal/agentcmd", "cmd/edgequorum-agent"},
			[]string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/informers", "k8s.io/client-go/dynamic", module + "internal/kubeclient/wrap"},
			"the agent reaches the apiserver through its narrow client, not a clientset of every API group"},
		{[]string{"internal/cli", "internal/agentcmd", "cmd/edgequorum-agent"},
			[]string{module + "admission", "sigs.k8s.io/kustomize"},
			"the narrow agent links nothing of the webhook, its certificates or the installer"},
		{[]string{"internal/cli", "internal/agentcmd", "cmd/edgequorum-agent"},
			[]string{"k8s.io/api/core/", "k8s.io/api/events/", "k8s.io/client-go/listers/", module + "zone/zonek8s/corecond"},
			"the narrow agent reads Nodes and writes Events in its own types: core/v1's init registers every core type, whose codecs are a tenth of its binary"},
		{[]string{"internal/cli", "internal/agentcmd", "cmd/edgequorum-agent"},
			[]string{"k8s.io/client-go/gentype", "k8s.io/client-go/util/apply", "github.com/google/gnostic-models"},
			"the narrow agent builds its requests on client-go's rest alone: gentype links server-side apply and the OpenAPI models for calls it never makes"},
	} {
		for _, d := range deps(t, rule.pkgs...) {
			for _, b := range rule.banned {
				if strings.HasPrefix(d, b) {
					t.Errorf("%v depend on %s: %s", rule.pkgs, d, rule.why)
				}
			}
		}
	}
}
