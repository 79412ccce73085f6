package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/internal/cli"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
)

func init() {
	register(command{name: "preflight", summary: "check that a cluster has everything edgequorum needs", run: runPreflight})
}

const preflightUsage = `Checks, with your kubeconfig, what an installation of edgequorum needs and
only an operator can provide, and says what to do about each gap:

  - Kubernetes 1.30 or newer (ValidatingAdmissionPolicy v1);
  - the namespaces, the agent's four admission policies and their bindings
    (deploy/install/*.yaml);
  - the zone key Secret, and that it parses;
  - nodes carrying the zone label, at least 3 per zone, none a control-plane node;
  - the webhook's TLS Secret, and a caBundle in the webhook configuration that
    verifies it for the webhook's Service;
  - the agent DaemonSet and the webhook Deployment, and how many pods are ready;
  - the releases the agents and the webhook run, against the skew policy:
    agents of at most two neighbouring releases, the webhook no older than
    any agent, and the zones of mixed releases while a roll is under way.

Exits 1 if anything required is missing; warnings alone exit 0.`

// Names of what the shipped manifests install; preflight looks for exactly these.
const (
	agentNamespace   = zone.DefaultLeaseNamespace
	webhookNamespace = "edgequorum-webhook"
	webhookName      = "edgequorum-webhook"
	webhookTLSSecret = "edgequorum-webhook-tls"
	agentDaemonSet   = "edgequorum-agent"
)

type checkLevel int

const (
	checkOK checkLevel = iota
	checkWarn
	checkFail
)

// check is one line of the preflight report; fix says what to run when it is
// not ok.
type check struct {
	level  checkLevel
	what   string
	detail string
	fix    string
}

func runPreflight(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("preflight", preflightUsage, stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig path (default: $KUBECONFIG, then ~/.kube/config)")
	zoneLabel := fs.String("zone-label", zone.DefaultZoneLabel, "the Node label naming the zone, as given to the agent and the webhook")
	timeout := fs.Duration("timeout", 20*time.Second, "time allowed for all checks")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return cli.Usagef("--kubeconfig: %v", err)
	}
	cfg.UserAgent = "edgequorum-preflight"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	checks := preflight(ctx, client, *zoneLabel)
	failed := printChecks(stdout, checks)
	if failed > 0 {
		return fmt.Errorf("%d required check(s) failed", failed)
	}
	return nil
}

// printChecks writes the report and returns how many checks failed.
func printChecks(w io.Writer, checks []check) int {
	failed := 0
	for _, c := range checks {
		mark := "ok  "
		switch c.level {
		case checkWarn:
			mark = "warn"
		case checkFail:
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(w, "[%s] %s: %s\n", mark, c.what, c.detail)
		if c.level != checkOK && c.fix != "" {
			fmt.Fprintf(w, "       fix: %s\n", c.fix)
		}
	}
	return failed
}

// preflight runs every check; each reports its own failure so one gap does not
// hide the others.
func preflight(ctx context.Context, client kubernetes.Interface, zoneLabel string) []check {
	var out []check
	out = append(out, checkServerVersion(client))
	out = append(out, checkNamespaces(ctx, client)...)
	out = append(out, checkPolicy(ctx, client))
	out = append(out, checkZoneKey(ctx, client))
	out = append(out, checkZoneLabels(ctx, client, zoneLabel)...)
	out = append(out, checkWebhookTLS(ctx, client)...)
	out = append(out, checkWorkloads(ctx, client)...)
	out = append(out, checkReleases(ctx, client, zoneLabel)...)
	return out
}

func checkServerVersion(client kubernetes.Interface) check {
	c := check{what: "Kubernetes version"}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		c.level, c.detail, c.fix = checkFail, err.Error(), "check the kubeconfig and that the apiserver answers"
		return c
	}
	major, _ := strconv.Atoi(strings.TrimRight(v.Major, "+"))
	minor, _ := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	c.detail = v.GitVersion
	if major < 1 || (major == 1 && minor < 30) {
		c.level = checkFail
		c.detail += ": ValidatingAdmissionPolicy v1, which keeps kubelets from writing verdicts, needs 1.30 or newer"
		c.fix = "upgrade the control plane to Kubernetes 1.30 or newer"
	}
	return c
}

func checkNamespaces(ctx context.Context, client kubernetes.Interface) []check {
	want := []struct{ name, level, fix string }{
		{agentNamespace, "privileged", "kubectl apply -f deploy/install/agent.yaml"},
		{webhookNamespace, "restricted", "kubectl apply -f deploy/install/webhook.yaml"},
	}
	var out []check
	for _, w := range want {
		c := check{what: "namespace " + w.name}
		ns, err := client.CoreV1().Namespaces().Get(ctx, w.name, metav1.GetOptions{})
		switch {
		case err != nil:
			c.level, c.detail, c.fix = checkFail, describeErr(err), w.fix
		case ns.Labels["pod-security.kubernetes.io/enforce"] != w.level:
			c.level, c.fix = checkWarn, w.fix
			c.detail = fmt.Sprintf("Pod Security enforce level %q, shipped %q", ns.Labels["pod-security.kubernetes.io/enforce"], w.level)
		default:
			c.detail = "Pod Security " + w.level
		}
		out = append(out, c)
	}
	return out
}

// agentPolicies are deploy/agent's ValidatingAdmissionPolicies, each bound
// under its own name: without them the agent's token on every edge box may
// taint any Node, and any kubelet may vouch for itself.
var agentPolicies = []string{"edgequorum-verdict-writer", "edgequorum-node-key-writer",
	"edgequorum-agent-node-writes", "edgequorum-agent-lease-writes", "edgequorum-agent-event-writes"}

func checkPolicy(ctx context.Context, client kubernetes.Interface) check {
	c := check{what: "admission policies", fix: "kubectl apply -f deploy/install/agent.yaml"}
	adm := client.AdmissionregistrationV1()
	for _, name := range agentPolicies {
		if _, err := adm.ValidatingAdmissionPolicies().Get(ctx, name, metav1.GetOptions{}); err != nil {
			c.level, c.detail = checkFail, "ValidatingAdmissionPolicy "+name+": "+describeErr(err)
			return c
		}
		if _, err := adm.ValidatingAdmissionPolicyBindings().Get(ctx, name, metav1.GetOptions{}); err != nil {
			c.level, c.detail = checkFail, "ValidatingAdmissionPolicyBinding "+name+": "+describeErr(err)
			return c
		}
	}
	c.detail = "only the agent writes verdicts, only a node's own agent its node key, and the agent writes nothing but edgequorum.io/ annotations and the Leases it holds"
	return c
}

func checkZoneKey(ctx context.Context, client kubernetes.Interface) check {
	c := check{what: "zone key Secret " + agentNamespace + "/" + zoneKeySecret,
		fix: "edgequorum keygen --id k1 --secret | kubectl create -f -"}
	s, err := client.CoreV1().Secrets(agentNamespace).Get(ctx, zoneKeySecret, metav1.GetOptions{})
	if err != nil {
		c.level, c.detail = checkFail, describeErr(err)
		return c
	}
	data, ok := s.Data[zoneKeyFileKey]
	if !ok {
		c.level, c.detail = checkFail, "has no "+zoneKeyFileKey+" entry, which the DaemonSet mounts as --key-file"
		return c
	}
	keys, err := zonekeys.Parse(bytes.NewReader(data))
	if err != nil {
		c.level, c.detail = checkFail, err.Error()
		return c
	}
	c.detail = fmt.Sprintf("%d key(s), %q signs", len(keys.IDs()), keys.SigningID())
	return c
}

func checkZoneLabels(ctx context.Context, client kubernetes.Interface, label string) []check {
	fix := "kubectl label node <edge node>... " + label + "=<site>"
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil {
		return []check{{level: checkFail, what: "zone label " + label, detail: describeErr(err), fix: fix}}
	}
	zones := map[string][]string{}
	var controlPlane []string
	for _, n := range nodes.Items {
		zones[n.Labels[label]] = append(zones[n.Labels[label]], n.Name)
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
			controlPlane = append(controlPlane, n.Name)
		}
	}
	if len(zones) == 0 {
		return []check{{level: checkFail, what: "zone label " + label, detail: "no node carries it, so no agent runs", fix: fix}}
	}
	names := make([]string, 0, len(zones))
	for z := range zones {
		names = append(names, z)
	}
	sort.Strings(names)
	var out []check
	for _, z := range names {
		c := check{what: "zone " + strconv.Quote(z), detail: fmt.Sprintf("%d node(s)", len(zones[z]))}
		if len(zones[z]) < 3 {
			c.level, c.fix = checkWarn, fix+" (on more nodes of that site)"
			c.detail += ": a zone needs 3 members to survive the loss of one; below that it cannot vouch for a node it cannot reach"
		}
		out = append(out, c)
	}
	if len(controlPlane) > 0 {
		sort.Strings(controlPlane)
		out = append(out, check{level: checkWarn, what: "zone label " + label,
			detail: "control-plane nodes carry it but run no agent: " + strings.Join(controlPlane, ", "),
			fix:    "kubectl label node <node> " + label + "-"})
	}
	return out
}

func checkWebhookTLS(ctx context.Context, client kubernetes.Interface) []check {
	// A webhook that keeps its own certificates (--manage-certs, as
	// deploy/install runs it) makes the Secret and the caBundle when its
	// first replica starts: until then they are not made yet, not missing.
	managed := webhookManagesCerts(ctx, client)
	tlsCheck := check{what: "webhook TLS Secret " + webhookNamespace + "/" + webhookTLSSecret,
		fix: "kubectl apply -f deploy/install/webhook.yaml"}
	notYet := checkFail
	if managed {
		tlsCheck.fix, notYet = "kubectl -n "+webhookNamespace+" get pods,events (the webhook makes it when a replica runs)", checkWarn
	}
	var leaf *x509.Certificate
	s, err := client.CoreV1().Secrets(webhookNamespace).Get(ctx, webhookTLSSecret, metav1.GetOptions{})
	if err == nil {
		leaf, err = firstCert(s.Data[corev1.TLSCertKey])
	}
	switch {
	case err != nil && managed && apierrors.IsNotFound(err):
		tlsCheck.level, tlsCheck.detail = checkWarn, "not made yet: the webhook keeps its own certificates and makes it when its first replica starts"
	case err != nil:
		tlsCheck.level, tlsCheck.detail = checkFail, describeErr(err)
	case managed:
		tlsCheck.detail = "kept by the webhook, valid until " + leaf.NotAfter.UTC().Format(time.RFC3339) + ", renewed with a third of its validity left"
		if time.Now().After(leaf.NotAfter) {
			tlsCheck.level, tlsCheck.detail = checkFail, "expired at "+leaf.NotAfter.UTC().Format(time.RFC3339)+": is any webhook replica running?"
		}
	default:
		tlsCheck.detail = "valid until " + leaf.NotAfter.UTC().Format(time.DateOnly)
		if time.Until(leaf.NotAfter) < 30*24*time.Hour {
			tlsCheck.level = checkWarn
			tlsCheck.detail += ": expires within 30 days"
		}
	}
	caCheck := check{what: "webhook caBundle", fix: tlsCheck.fix}
	mwc, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		caCheck.level, caCheck.detail = checkFail, "MutatingWebhookConfiguration "+webhookName+": "+describeErr(err)
		return []check{tlsCheck, caCheck}
	}
	caCheck.level, caCheck.detail = verifyCABundles(mwc.Webhooks, leaf)
	if caCheck.level == checkFail && leaf == nil {
		caCheck.level = notYet
		if managed {
			caCheck.detail = "not written yet: the webhook writes it with the Secret"
		}
	}
	return []check{tlsCheck, caCheck}
}

// webhookManagesCerts reports whether the webhook's Deployment runs with
// --manage-certs.
func webhookManagesCerts(ctx context.Context, client kubernetes.Interface) bool {
	d, err := client.AppsV1().Deployments(webhookNamespace).Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if slices.Contains(c.Args, "--manage-certs") || slices.Contains(c.Args, "--manage-certs=true") {
			return true
		}
	}
	return false
}

// verifyCABundles checks that every webhook of the configuration trusts the
// serving certificate for the Service DNS name the apiserver dials; without it
// the apiserver cannot call the webhook: the hooks with failurePolicy Ignore
// protect nothing, and the nodestatus hook (failurePolicy Fail) refuses every
// verdict the zone leaders write.
func verifyCABundles(hooks []admissionregistrationv1.MutatingWebhook, leaf *x509.Certificate) (checkLevel, string) {
	for _, h := range hooks {
		if len(h.ClientConfig.CABundle) == 0 {
			return checkFail, h.Name + " has an empty caBundle: the apiserver cannot call it"
		}
		if leaf == nil {
			continue
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(h.ClientConfig.CABundle) {
			return checkFail, h.Name + ": caBundle holds no PEM certificate"
		}
		dns := webhookName + "." + webhookNamespace + ".svc"
		if svc := h.ClientConfig.Service; svc != nil {
			dns = svc.Name + "." + svc.Namespace + ".svc"
		}
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: dns, Roots: pool}); err != nil {
			return checkFail, h.Name + ": the caBundle does not verify the TLS Secret's certificate: " + err.Error()
		}
	}
	return checkOK, fmt.Sprintf("%d webhook(s) trust the serving certificate", len(hooks))
}

func firstCert(pemData []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(pemData)
	if b == nil {
		return nil, fmt.Errorf("%s holds no PEM certificate", corev1.TLSCertKey)
	}
	return x509.ParseCertificate(b.Bytes)
}

func checkWorkloads(ctx context.Context, client kubernetes.Interface) []check {
	ds := check{what: "agent DaemonSet", fix: "kubectl -n " + agentNamespace + " describe daemonset " + agentDaemonSet}
	if d, err := client.AppsV1().DaemonSets(agentNamespace).Get(ctx, agentDaemonSet, metav1.GetOptions{}); err != nil {
		ds.level, ds.detail, ds.fix = checkFail, describeErr(err), "kubectl apply -f deploy/install/agent.yaml"
	} else {
		ds.detail = fmt.Sprintf("%d of %d agents ready", d.Status.NumberReady, d.Status.DesiredNumberScheduled)
		if d.Status.NumberReady < d.Status.DesiredNumberScheduled || d.Status.DesiredNumberScheduled == 0 {
			ds.level = checkWarn
		}
	}
	dep := check{what: "webhook Deployment", fix: "kubectl -n " + webhookNamespace + " describe deployment " + webhookName}
	d, err := client.AppsV1().Deployments(webhookNamespace).Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		dep.level, dep.detail, dep.fix = checkFail, describeErr(err), "kubectl apply -f deploy/install/webhook.yaml"
		return []check{ds, dep}
	}
	dep.detail = fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, d.Status.Replicas)
	if d.Status.ReadyReplicas == 0 {
		dep.level = checkWarn
		dep.detail += ": nothing answers the apiserver yet"
	}
	out := []check{ds, dep}
	if failsOver(d) {
		out = append(out, checkFailoverRBAC(ctx, client))
	}
	return out
}

// failsOver reports whether the webhook Deployment runs the failover
// (--dead-node-action=out-of-service).
func failsOver(d *appsv1.Deployment) bool {
	for _, c := range d.Spec.Template.Spec.Containers {
		for i, a := range c.Args {
			if a == "--dead-node-action="+admission.DeadNodeActionOutOfService ||
				(a == "--dead-node-action" && i+1 < len(c.Args) && c.Args[i+1] == admission.DeadNodeActionOutOfService) {
				return true
			}
		}
	}
	return false
}

// checkFailoverRBAC asks the apiserver whether the webhook's ServiceAccount may
// delete pods, which the failover needs to force-delete the pods its taint
// evicted; without it StatefulSet pods wait up to 20 s more for the pod
// garbage collector.
func checkFailoverRBAC(ctx context.Context, client kubernetes.Interface) check {
	c := check{what: "failover RBAC (--dead-node-action=out-of-service)", detail: "the webhook may delete pods",
		fix: "kubectl apply -f deploy/install/webhook-failover.yaml  (or add deploy/webhook/components/failover to your overlay)"}
	sar, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + webhookNamespace + ":" + webhookName,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + webhookNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "pods"},
		},
	}, metav1.CreateOptions{})
	switch {
	case err != nil:
		c.level, c.detail = checkWarn, "cannot ask the apiserver: "+describeErr(err)
	case !sar.Status.Allowed:
		c.level, c.detail = checkFail, "the webhook's ServiceAccount may not delete pods, so the failover cannot force-delete the pods its taint evicted (StatefulSet pods wait up to 20 s more)"
	}
	return c
}

func describeErr(err error) string {
	if apierrors.IsNotFound(err) {
		return "missing"
	}
	if apierrors.IsForbidden(err) {
		return "not allowed to read it with this kubeconfig (" + err.Error() + ")"
	}
	return err.Error()
}
