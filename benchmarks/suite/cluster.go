package suite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/edgequorum/edgequorum/benchmarks/baseline"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/zone"
)

// BaselineUser is the identity the baseline daemons write as, so the audit log
// tells their writes from edgequorum's (zonerun.AgentUser).
const BaselineUser = "superedge:edge-health"

// installBaseline gives the baseline its ServiceAccount-like identity with the
// permissions SuperEdge's edge-health has (read nodes and ConfigMaps, update
// nodes), its two ConfigMaps, and a kubeconfig; it returns the kubeconfig path.
func (s *suite) installBaseline(ctx context.Context) (string, error) {
	client := s.cluster.Client()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-edge-health"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "update"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-edge-health"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: BaselineUser}},
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("baseline role: %w", err)
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("baseline role binding: %w", err)
	}
	key := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("baseline hmac key: %w", err)
	}
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: baseline.HMACConfigMap, Namespace: baseline.ConfigNamespace},
			Data: map[string]string{baseline.HMACKey: hex.EncodeToString(key)}},
		{ObjectMeta: metav1.ObjectMeta{Name: baseline.ZoneConfigMap, Namespace: baseline.ConfigNamespace},
			Data: map[string]string{baseline.TaintZoneConfigKey: "true"}},
	} {
		if _, err := client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("baseline config map %s: %w", cm.Name, err)
		}
	}
	cfg, err := s.cluster.UserConfig(BaselineUser, "system:authenticated")
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.cfg.WorkDir, "baseline.kubeconfig")
	return path, zonerun.WriteKubeconfig(cfg, path)
}

// prepareBaselineNodes labels the zone's nodes the way SuperEdge groups them and
// removes any earlier baseline verdict, so formation is measured from scratch.
func prepareBaselineNodes(ctx context.Context, client kubernetes.Interface, zoneName string, nodes []string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]string{baseline.ZoneLabel: zoneName},
		"annotations": map[string]any{baseline.AnnotationKey: nil},
	}})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if _, err := client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label node %s for the baseline: %w", n, err)
		}
	}
	return nil
}

// waitUntainted waits until KCM has lifted the unreachable taints it put on
// the zone during a cut or a long kill, so the next phase does not start by
// fighting them.
func waitUntainted(ctx context.Context, client kubernetes.Interface, zoneName string, timeout time.Duration) error {
	sel := labels.Set{zone.DefaultZoneLabel: zoneName}.String()
	deadline := time.Now().Add(timeout)
	for {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err == nil {
			tainted := 0
			for _, n := range list.Items {
				for _, t := range n.Spec.Taints {
					if t.Key == baseline.UnreachableTaint {
						tainted++
						break
					}
				}
			}
			if tainted == 0 {
				return nil
			}
			err = fmt.Errorf("%d nodes still tainted unreachable", tainted)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zone %s: %w", zoneName, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// deleteZoneNodes removes a finished size's Nodes so the apiserver and every
// later watcher stay small.
func deleteZoneNodes(ctx context.Context, client kubernetes.Interface, zoneName string) error {
	sel := labels.Set{zone.DefaultZoneLabel: zoneName}.String()
	if err := client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		return fmt.Errorf("delete nodes of zone %s: %w", zoneName, err)
	}
	return nil
}
