package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/edgequorum/edgequorum/deploy/internal/kustomize"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// The webhook with components/monitoring, rendered into
// install/webhook-monitoring.yaml, and the component's own directory.
const (
	monitoringOverlay   = "webhook/overlays/monitoring"
	monitoringComponent = "webhook/components/monitoring"
	monitoringNamespace = "edgequorum-webhook"
	// The make target that puts promtool and the Prometheus Operator's CRDs
	// into bin/.
	monitoringTarget = "monitoring-tools"
	// Where every alert's runbook_url points: a section of docs/operating.md.
	runbookBase = "https://github.com/edgequorum/edgequorum/blob/main/docs/operating.md#"
)

// The objects components/monitoring adds, by kind/name.
const (
	podMonitorKey     = "PodMonitor/edgequorum-webhook"
	prometheusRuleKey = "PrometheusRule/edgequorum-webhook"
	dashboardKey      = "ConfigMap/edgequorum-dashboard"
	dashboardDataKey  = "edgequorum.json"
)

// monitoringObjects returns what components/monitoring adds to the webhook,
// by kind/name: the objects of the overlay that deploy/webhook lacks. It fails
// t if the component changes or drops any object of the base.
func monitoringObjects(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	base, err := kustomize.Render(kustomize.Dir("webhook"))
	if err != nil {
		t.Fatal(err)
	}
	with, err := kustomize.Render(kustomize.Dir(monitoringOverlay))
	if err != nil {
		t.Fatal(err)
	}
	key := func(o *unstructured.Unstructured) string {
		return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
	}
	inBase := map[string]*unstructured.Unstructured{}
	for _, o := range base {
		inBase[key(o)] = o
	}
	added := map[string]*unstructured.Unstructured{}
	for _, o := range with {
		b, ok := inBase[key(o)]
		switch {
		case !ok:
			added[o.GetKind()+"/"+o.GetName()] = o
		case !reflect.DeepEqual(b.Object, o.Object):
			t.Errorf("components/monitoring changes %s of the base", key(o))
		}
	}
	if len(with) != len(base)+len(added) {
		t.Errorf("deploy/%s renders %d objects, want the base's %d and the component's %d", monitoringOverlay, len(with), len(base), len(added))
	}
	return added
}

// renderedBase returns deploy/webhook's object of kind and name.
func renderedBase(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	objs, err := kustomize.Render(kustomize.Dir("webhook"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("deploy/webhook renders no %s %s", kind, name)
	return nil
}

// TestMonitoringComponent: the component adds a PodMonitor, a PrometheusRule
// and the dashboard ConfigMap in the webhook's namespace and nothing else,
// and the PodMonitor scrapes what the base's Deployment runs: its pods'
// labels, its HTTPS port, its TLS Secret's CA, the Service's name in the
// certificate.
func TestMonitoringComponent(t *testing.T) {
	added := monitoringObjects(t)
	if got, want := slices.Sorted(maps.Keys(added)), []string{dashboardKey, podMonitorKey, prometheusRuleKey}; !slices.Equal(got, want) {
		t.Fatalf("components/monitoring adds %v, want %v", got, want)
	}
	for k, o := range added {
		if o.GetNamespace() != monitoringNamespace {
			t.Errorf("%s in namespace %q, want %s", k, o.GetNamespace(), monitoringNamespace)
		}
		if l := o.GetLabels(); l["app.kubernetes.io/name"] != "edgequorum" || l["app.kubernetes.io/component"] != "webhook" {
			t.Errorf("%s labels %v, want the base's app.kubernetes.io labels", k, l)
		}
	}

	dep := renderedBase(t, "Deployment", "edgequorum-webhook")
	svc := renderedBase(t, "Service", "edgequorum-webhook")
	pm := added[podMonitorKey]
	sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
	if len(sel) == 0 {
		t.Error("PodMonitor selects every pod of the namespace")
	}
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("PodMonitor selects %s=%s; the webhook's pods have %v", k, v, podLabels)
		}
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 {
		t.Fatalf("PodMonitor has %d endpoints, want 1", len(eps))
	}
	ep := eps[0].(map[string]any)
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	var ports []string
	for _, p := range containers[0].(map[string]any)["ports"].([]any) {
		ports = append(ports, fmt.Sprint(p.(map[string]any)["name"]))
	}
	if !slices.Contains(ports, fmt.Sprint(ep["port"])) || ep["scheme"] != "https" || ep["path"] != "/metrics" {
		t.Errorf("PodMonitor scrapes port %v scheme %v path %v; the webhook serves /metrics over HTTPS on its port of %v", ep["port"], ep["scheme"], ep["path"], ports)
	}
	// The Secret the webhook serves from (--tls-secret), whose ca.crt is
	// the trust bundle it keeps.
	var tlsSecret string
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "--tls-secret="); ok {
			tlsSecret = name
		}
	}
	ca, _, _ := unstructured.NestedStringMap(ep, "tlsConfig", "ca", "secret")
	if ca["name"] != tlsSecret || ca["key"] != "ca.crt" {
		t.Errorf("PodMonitor takes its CA from %v; the webhook's certificate is in Secret %s, its CA under ca.crt", ca, tlsSecret)
	}
	if got, want := fmt.Sprint(ep["tlsConfig"].(map[string]any)["serverName"]), svc.GetName()+"."+svc.GetNamespace()+".svc"; got != want {
		t.Errorf("PodMonitor checks the certificate for %q; it is issued for %q", got, want)
	}
	if s, _, _ := unstructured.NestedFieldNoCopy(ep, "tlsConfig", "insecureSkipVerify"); s == true {
		t.Error("PodMonitor skips certificate verification")
	}

	cm := added[dashboardKey]
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard=1 for Grafana's sidecar", cm.GetLabels())
	}
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	if got := slices.Collect(maps.Keys(data)); !slices.Equal(got, []string{dashboardDataKey}) {
		t.Errorf("dashboard ConfigMap data keys %v, want [%s]", got, dashboardDataKey)
	}
	file, err := os.ReadFile(filepath.Join(kustomize.Dir(monitoringComponent), "dashboard", dashboardDataKey))
	if err != nil {
		t.Fatal(err)
	}
	if data[dashboardDataKey] != string(file) {
		t.Error("dashboard ConfigMap does not hold dashboard/edgequorum.json as it is")
	}
}

// alertRule is one alerting rule of the PrometheusRule's spec.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// shippedRules writes the spec of the PrometheusRule that kustomize renders
// (the very groups that ship, not a copy) to dir/rules.yaml, as promtool
// reads rule files, and returns its alerts.
func shippedRules(t *testing.T, dir string) []alertRule {
	t.Helper()
	rule := monitoringObjects(t)[prometheusRuleKey]
	if rule == nil {
		t.Fatalf("components/monitoring renders no %s", prometheusRuleKey)
	}
	spec, _, _ := unstructured.NestedMap(rule.Object, "spec")
	b, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var groups struct {
		Groups []struct {
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &groups); err != nil {
		t.Fatal(err)
	}
	var alerts []alertRule
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r)
			}
		}
	}
	return alerts
}

// promtool runs bin/promtool with args in dir and fails t with its output if
// it fails.
func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	bin := testcluster.RequireTool(t, "promtool", monitoringTarget)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ruleTests is what TestMonitoringRules reads of a `promtool test rules`
// file.
type ruleTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name       string `json:"name"`
		AlertTests []struct {
			EvalTime  string `json:"eval_time"`
			AlertName string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// healthyFleet is the case of testdata/alerts_test.yaml in which nothing may
// fire.
const healthyFleet = "healthy fleet"

// TestMonitoringRules checks the shipped PrometheusRule with promtool and
// runs the unit tests in components/monitoring/testdata against it. Every
// alert must fire in one of them, be silent in the healthy fleet after its
// `for`, carry a severity, a summary and a description, and point to a
// section of docs/operating.md that exists.
func TestMonitoringRules(t *testing.T) {
	dir := t.TempDir()
	alerts := shippedRules(t, dir)
	if len(alerts) == 0 {
		t.Fatal("the PrometheusRule has no alerts")
	}
	out := promtool(t, dir, "check", "rules", "rules.yaml")
	t.Logf("promtool check rules: %s", strings.TrimSpace(out))

	anchors := docAnchors(t, filepath.Join(kustomize.Dir(".."), "docs", "operating.md"))
	names := map[string]alertRule{}
	for _, a := range alerts {
		if _, dup := names[a.Alert]; dup {
			t.Errorf("alert %s defined twice", a.Alert)
		}
		names[a.Alert] = a
		if s := a.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", a.Alert, s)
		}
		for _, k := range []string{"summary", "description"} {
			if strings.TrimSpace(a.Annotations[k]) == "" {
				t.Errorf("%s has no %s annotation", a.Alert, k)
			}
		}
		anchor, ok := strings.CutPrefix(a.Annotations["runbook_url"], runbookBase)
		switch {
		case !ok:
			t.Errorf("%s: runbook_url %q, want a section of %s", a.Alert, a.Annotations["runbook_url"], runbookBase)
		case anchor != strings.ToLower(a.Alert):
			t.Errorf("%s: runbook_url points to #%s, want its own section #%s", a.Alert, anchor, strings.ToLower(a.Alert))
		case !anchors[anchor]:
			t.Errorf("%s: docs/operating.md has no section #%s", a.Alert, anchor)
		}
	}

	files, err := filepath.Glob(filepath.Join(kustomize.Dir(monitoringComponent), "testdata", "*_test.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool test files in %s/testdata (%v)", monitoringComponent, err)
	}
	fires := map[string]bool{}
	// The latest eval_time at which the healthy fleet checks each alert.
	healthy := map[string]time.Duration{}
	var args []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rt ruleTests
		if err := yaml.Unmarshal(b, &rt); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Equal(rt.RuleFiles, []string{"rules.yaml"}) {
			t.Errorf("%s: rule_files %v, want [rules.yaml], the shipped rules this test writes", f, rt.RuleFiles)
		}
		for _, tc := range rt.Tests {
			for _, at := range tc.AlertTests {
				if _, ok := names[at.AlertName]; !ok {
					t.Errorf("%s, %q: no alert %s in the PrometheusRule", filepath.Base(f), tc.Name, at.AlertName)
				}
				// promtool compares each expected alert's labels and
				// annotations with the alert's, all of them.
				if len(at.ExpAlerts) > 0 {
					fires[at.AlertName] = true
				}
				if tc.Name == healthyFleet {
					if len(at.ExpAlerts) > 0 {
						t.Errorf("%q expects %s to fire", healthyFleet, at.AlertName)
					}
					d, err := time.ParseDuration(at.EvalTime)
					if err != nil {
						t.Fatalf("%s, %q: eval_time %q: %v", filepath.Base(f), tc.Name, at.EvalTime, err)
					}
					healthy[at.AlertName] = max(healthy[at.AlertName], d)
				}
			}
		}
		// Beside rules.yaml, which the files name relative to themselves.
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, filepath.Base(f))
	}
	for _, a := range alerts {
		if !fires[a.Alert] {
			t.Errorf("no test case expects %s to fire", a.Alert)
		}
		forDur := time.Duration(0)
		if a.For != "" {
			d, err := time.ParseDuration(a.For)
			if err != nil {
				t.Fatalf("%s: for %q: %v", a.Alert, a.For, err)
			}
			forDur = d
		}
		// Only an evaluation after `for` shows that the alert stays silent
		// rather than pending.
		if at, ok := healthy[a.Alert]; !ok || at <= forDur {
			t.Errorf("%q does not check %s after its `for` (%s)", healthyFleet, a.Alert, a.For)
		}
	}
	out = promtool(t, dir, append([]string{"test", "rules"}, args...)...)
	t.Logf("promtool test rules: %s", strings.TrimSpace(out))
}

// docAnchors returns the anchors GitHub gives the headings of a Markdown
// file: lower case, punctuation but hyphens and underscores dropped, spaces
// turned into hyphens.
func docAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		out[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
	}
	return out
}

// dashboard is what TestMonitoringDashboard reads of the Grafana dashboard.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource datasource `json:"datasource"`
	Targets    []struct {
		RefID      string      `json:"refId"`
		Expr       string      `json:"expr"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	// A collapsed row holds its panels.
	Panels []dashboardPanel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// grafanaIntervals stand in for the range variables Grafana fills in, so
// that promtool can parse the queries.
var grafanaIntervals = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// TestMonitoringDashboard: the dashboard the ConfigMap ships parses, has the
// panels an operator looks for, queries the data source its `datasource`
// variable picks, and every query is PromQL that promtool accepts (each is
// checked as a recording rule).
func TestMonitoringDashboard(t *testing.T) {
	cm := monitoringObjects(t)[dashboardKey]
	if cm == nil {
		t.Fatalf("components/monitoring renders no %s", dashboardKey)
	}
	raw, _, _ := unstructured.NestedString(cm.Object, "data", dashboardDataKey)
	var d dashboard
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q: both are needed for a stable URL", d.UID, d.Title)
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = true
		}
	}
	if !dsVar {
		t.Errorf("dashboard has no `datasource` variable of Prometheus data sources: %+v", d.Templating.List)
	}

	var panels []dashboardPanel
	for _, p := range d.Panels {
		panels = append(panels, p)
		panels = append(panels, p.Panels...)
	}
	var titles []string
	var rules []map[string]string
	for _, p := range panels {
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q queries data source %+v, want ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource != nil && tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q query %s uses data source %+v, want ${datasource}", p.Title, tg.RefID, *tg.Datasource)
			}
			expr := grafanaIntervals.Replace(tg.Expr)
			if strings.TrimSpace(expr) == "" || strings.Contains(expr, "$") {
				t.Errorf("panel %q query %s: %q is empty or uses a variable promtool cannot stand in for", p.Title, tg.RefID, tg.Expr)
				continue
			}
			rules = append(rules, map[string]string{
				"record": fmt.Sprintf("edgequorum_dashboard_query_%d", len(rules)),
				"expr":   expr,
			})
		}
	}
	for _, want := range []string{
		"Zones by state", "Protected nodes", "Cut-off zones: protection left", "Zones without a leader",
		"Refused verdicts", "Refused zone Lease writes", "Refused evidence attestations", "Failovers",
		"Admission requests", "Admission latency p99", "Certificate expires in",
	} {
		if !slices.Contains(titles, want) {
			t.Errorf("dashboard lacks the panel %q (has %v)", want, titles)
		}
	}

	dir := t.TempDir()
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := promtool(t, dir, "check", "rules", "dashboard.yaml")
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(rules)); !strings.Contains(out, want) {
		t.Errorf("promtool check rules on the dashboard's %d queries: %s", len(rules), out)
	}
}

// The Prometheus Operator CRDs the component's kinds need, from bin/
// (`make monitoring-tools`).
var monitoringCRDs = []string{"monitoring.coreos.com_podmonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"}

// monitoringResources are the resources of the component's kinds.
var monitoringResources = map[string]string{"PodMonitor": "podmonitors", "PrometheusRule": "prometheusrules", "ConfigMap": "configmaps"}

// TestMonitoringOnRealAPIServer creates the Prometheus Operator's CRDs and
// then the component's objects on a real apiserver, with strict field
// validation, so that the CRDs' schemas check the PodMonitor and the
// PrometheusRule (a field they lack is refused, not dropped), and reads them
// back. A PodMonitor the schema forbids must be refused, or the check proves
// nothing.
func TestMonitoringOnRealAPIServer(t *testing.T) {
	testcluster.RequireBinaries(t)
	var crds []*unstructured.Unstructured
	for _, name := range monitoringCRDs {
		path := testcluster.RequireTool(t, filepath.Join("prometheus-operator-crd", name), monitoringTarget)
		crds = append(crds, readObject(t, path))
	}
	added := monitoringObjects(t)
	c := testcluster.StartT(t, testcluster.Options{NoCloudNode: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := c.RESTConfig()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	if err := Apply(ctx, cfg, crds, false); err != nil {
		t.Fatal(err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, crd := range crds {
		poll.Until(t, time.Minute, "CRD "+crd.GetName()+" established", func() (bool, string) {
			got, err := dyn.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				c := c.(map[string]any)
				if c["type"] == "Established" && c["status"] == "True" {
					return true, ""
				}
			}
			return false, fmt.Sprint(conds)
		})
	}
	if err := Apply(ctx, cfg, []*unstructured.Unstructured{renderedBase(t, "Namespace", monitoringNamespace)}, false); err != nil {
		t.Fatal(err)
	}

	strict := metav1.CreateOptions{FieldManager: "edgequorum-deploy", FieldValidation: metav1.FieldValidationStrict}
	for _, k := range slices.Sorted(maps.Keys(added)) {
		if err := create(ctx, cfg, []*unstructured.Unstructured{added[k]}, strict); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(added)) {
		want := added[k]
		gvk := want.GroupVersionKind()
		gvr := gvk.GroupVersion().WithResource(monitoringResources[gvk.Kind])
		got, err := dyn.Resource(gvr).Namespace(want.GetNamespace()).Get(ctx, want.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s not created: %v", k, err)
		}
		field := "spec"
		if want.GetKind() == "ConfigMap" {
			field = "data"
		}
		if path, ok := contains(got.Object[field], want.Object[field], field); !ok {
			t.Errorf("%s as stored lacks %s of the rendered object", k, path)
		}
		t.Logf("%s created (uid %s)", k, got.GetUID())
	}

	// The schemas bite: an unknown scheme, and a field the schema lacks.
	for name, mutate := range map[string]func(ep map[string]any){
		"bad-scheme":    func(ep map[string]any) { ep["scheme"] = "ftp" },
		"unknown-field": func(ep map[string]any) { ep["tlsconfig"] = ep["tlsConfig"] },
	} {
		pm := added[podMonitorKey].DeepCopy()
		pm.SetName("edgequorum-webhook-" + name)
		eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
		mutate(eps[0].(map[string]any))
		if err := unstructured.SetNestedSlice(pm.Object, eps, "spec", "podMetricsEndpoints"); err != nil {
			t.Fatal(err)
		}
		err := create(ctx, cfg, []*unstructured.Unstructured{pm}, strict)
		if err == nil || !(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) {
			t.Errorf("PodMonitor %s: %v, want it refused by the CRD's schema", name, err)
			continue
		}
		t.Logf("PodMonitor %s refused: %v", name, err)
	}
}

// readObject reads the one object of a YAML file.
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(bytes.TrimSpace(js)); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return u
}

// contains reports whether got holds every field of want with its value
// (got may hold more: the defaults a CRD's schema adds), and if not, the
// path of the first field that differs.
func contains(got, want any, path string) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if p, ok := contains(g[k], w[k], path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := contains(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	default:
		return path, reflect.DeepEqual(got, want)
	}
}
