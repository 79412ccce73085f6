package zonerun

import (
	"context"
	"fmt"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
)

const (
	agentServiceAccount = "edgequorum-agent"
	// agentTokenSeconds outlives any test, benchmark or demo run.
	agentTokenSeconds = 48 * 3600
)

// agentConfig returns credentials for node's agent as the DaemonSet's pod holds
// them: a token of the agent's ServiceAccount bound to a Pod on node, so it
// carries the node-name claim the node-key policy checks. The Pod never runs
// (the fake kubelet runs nothing); it tolerates every taint, like the
// DaemonSet's, so no eviction invalidates the token during a test.
func agentConfig(ctx context.Context, client kubernetes.Interface, base *rest.Config, node string) (*rest.Config, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "edgequorum-agent-" + node, Namespace: zone.DefaultLeaseNamespace,
			Labels: map[string]string{"app.kubernetes.io/name": "edgequorum-agent-zonerun"}},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: agentServiceAccount,
			Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:         []corev1.Container{{Name: "agent", Image: "edgequorum/zonerun-placeholder"}},
		},
	}
	pods := client.CoreV1().Pods(pod.Namespace)
	got, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("zonerun: agent pod for %s: %w", node, err)
	}
	expiry := int64(agentTokenSeconds)
	tr, err := client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, agentServiceAccount, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{
			ExpirationSeconds: &expiry,
			BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: got.Name, UID: got.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("zonerun: agent token for %s: %w", node, err)
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = nil, nil, "", ""
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// AgentConfig returns the credentials node's agent holds (see agentConfig), for
// tests that play a stolen edge box: root on node holds exactly this token.
// Install the agent's RBAC first (InstallAgentRBAC, or Start).
func AgentConfig(ctx context.Context, c *testcluster.Cluster, node string) (*rest.Config, error) {
	return agentConfig(ctx, c.Client(), c.RESTConfig(), node)
}
