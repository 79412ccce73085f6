package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edgequorum/edgequorum/admission/webhookcerts"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
)

func fakeCluster(t *testing.T, minor string, objs ...runtime.Object) *fake.Clientset {
	t.Helper()
	c := fake.NewClientset(objs...)
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: minor, GitVersion: "v1." + minor + ".0"}
	return c
}

func report(checks []check) (string, int) {
	var b bytes.Buffer
	failed := printChecks(&b, checks)
	return b.String(), failed
}

func TestPreflightNamesEveryGapOfAnEmptyCluster(t *testing.T) {
	c := fakeCluster(t, "29")
	out, failed := report(preflight(context.Background(), c, zone.DefaultZoneLabel))
	for _, want := range []string{
		"[FAIL] Kubernetes version: v1.29.0: ValidatingAdmissionPolicy v1",
		"[FAIL] namespace edgequorum-system: missing",
		"[FAIL] admission policies",
		"[FAIL] zone key Secret edgequorum-system/edgequorum-zone-key: missing",
		"fix: edgequorum keygen --id k1 --secret | kubectl create -f -",
		"[FAIL] zone label " + zone.DefaultZoneLabel + ": no node carries it",
		"[FAIL] webhook TLS Secret edgequorum-webhook/edgequorum-webhook-tls: missing",
		"[FAIL] webhook caBundle",
		"[FAIL] agent DaemonSet: missing",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if failed < 9 {
		t.Errorf("%d checks failed, want at least 9:\n%s", failed, out)
	}
}

func TestPreflightPassesAnInstalledCluster(t *testing.T) {
	certs, err := webhookcerts.Generate(webhookcerts.Options{Service: webhookName, Namespace: webhookNamespace, Validity: 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	line, err := zonekeys.GenerateLine("k1")
	if err != nil {
		t.Fatal(err)
	}
	ns := func(name, level string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod-security.kubernetes.io/enforce": level}}}
	}
	node := func(name, z string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{zone.DefaultZoneLabel: z}}}
	}
	hook := func(name string, ca []byte) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{Namespace: webhookNamespace, Name: webhookName}, CABundle: ca}}
	}
	objs := []runtime.Object{
		ns(agentNamespace, "privileged"), ns(webhookNamespace, "restricted"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: zoneKeySecret}, Data: map[string][]byte{zoneKeyFileKey: []byte(line + "\n")}},
		node("edge-1", "site-a"), node("edge-2", "site-a"), node("edge-3", "site-a"),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: webhookNamespace, Name: webhookTLSSecret},
			Data: map[string][]byte{corev1.TLSCertKey: certs.Cert, corev1.TLSPrivateKeyKey: certs.Key}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookName},
			Webhooks: []admissionregistrationv1.MutatingWebhook{hook("nodes", certs.CACert), hook("slices", certs.CACert)}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: agentNamespace, Name: agentDaemonSet},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, NumberReady: 3}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: webhookNamespace, Name: webhookName},
			Status: appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2}},
	}
	// In front: the caBundle case below replaces an object counted from the end.
	for _, p := range agentPolicies {
		objs = append([]runtime.Object{&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: p}},
			&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: p}}}, objs...)
	}
	out, failed := report(preflight(context.Background(), fakeCluster(t, "36", objs...), zone.DefaultZoneLabel))
	if failed != 0 || strings.Contains(out, "warn") {
		t.Fatalf("installed cluster: %d failed\n%s", failed, out)
	}

	// A caBundle from another CA is caught, not just an empty one.
	other, err := webhookcerts.Generate(webhookcerts.Options{Service: webhookName, Namespace: webhookNamespace, Validity: 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	objs[len(objs)-3] = &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{hook("nodes", certs.CACert), hook("slices", other.CACert)}}
	out, _ = report(preflight(context.Background(), fakeCluster(t, "36", objs...), zone.DefaultZoneLabel))
	if !strings.Contains(out, "[FAIL] webhook caBundle: slices: the caBundle does not verify") {
		t.Fatalf("foreign caBundle not caught:\n%s", out)
	}
}

// TestPreflightChecksTheFailoverRBAC: a webhook that runs the failover needs
// `delete pods`, which only components/failover grants; preflight asks the
// apiserver for it, and only when the flag is set.
func TestPreflightChecksTheFailoverRBAC(t *testing.T) {
	deployment := func(args ...string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: webhookNamespace, Name: webhookName},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "webhook", Args: append([]string{"webhook"}, args...)}}}}},
			Status: appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2}}
	}
	for _, tt := range []struct {
		name    string
		args    []string
		allowed bool
		want    string
	}{
		{"failover off", nil, false, ""},
		{"failover on, right granted", []string{"--dead-node-action=out-of-service"}, true, "[ok  ] failover RBAC"},
		{"failover on, right missing", []string{"--dead-node-action=out-of-service"}, false, "[FAIL] failover RBAC"},
		{"failover on in two args, right missing", []string{"--dead-node-action", "out-of-service"}, false, "[FAIL] failover RBAC"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := fakeCluster(t, "36", deployment(tt.args...))
			var asked *authorizationv1.SubjectAccessReview
			c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				asked = a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
				out := asked.DeepCopy()
				out.Status.Allowed = tt.allowed
				return true, out, nil
			})
			out, _ := report(checkWorkloads(context.Background(), c))
			if tt.want == "" {
				if strings.Contains(out, "failover") || asked != nil {
					t.Fatalf("without the flag preflight checked the failover:\n%s", out)
				}
				return
			}
			if !strings.Contains(out, tt.want) {
				t.Fatalf("report lacks %q:\n%s", tt.want, out)
			}
			if ra := asked.Spec.ResourceAttributes; asked.Spec.User != "system:serviceaccount:edgequorum-webhook:edgequorum-webhook" ||
				ra == nil || ra.Verb != "delete" || ra.Resource != "pods" {
				t.Errorf("asked %+v, want whether the webhook's ServiceAccount may delete pods", asked.Spec)
			}
		})
	}
}

// TestPreflightWaitsForAWebhookThatKeepsItsOwnCertificates: right after
// `kubectl apply -f deploy/install/webhook.yaml`, before a replica ran, the
// Secret and the caBundle are not made yet: a warning that says who makes
// them, not a failure that sends the operator to make them by hand.
func TestPreflightWaitsForAWebhookThatKeepsItsOwnCertificates(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: webhookName, Namespace: webhookNamespace},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "webhook", Args: []string{"webhook", "--tls-secret=" + webhookTLSSecret, "--manage-certs"}}}}}},
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: webhookName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "nodes.webhook.edgequorum.io"}}}
	out, _ := report(checkWebhookTLS(context.Background(), fakeCluster(t, "33", d, mwc)))
	for _, want := range []string{
		"[warn] webhook TLS Secret edgequorum-webhook/edgequorum-webhook-tls: not made yet: the webhook keeps its own certificates",
		"[warn] webhook caBundle: not written yet",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("a webhook that has not started yet fails preflight:\n%s", out)
	}
}
