package zonerun

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgequorum/edgequorum/deploy"
	"github.com/edgequorum/edgequorum/internal/proc"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// webhookNamespace is the webhook's own namespace, which deploy/webhook ships;
// its repair loop's election Lease lives there.
const webhookNamespace = "edgequorum-webhook"

// WebhookUser is the identity the webhook runs as: the ServiceAccount
// deploy/webhook binds, in the webhook's own namespace.
const WebhookUser = "system:serviceaccount:" + webhookNamespace + ":edgequorum-webhook"

// Webhook is `edgequorum webhook` as a local process, registered with the
// apiserver through deploy/webhook's MutatingWebhookConfiguration pointed at
// https://127.0.0.1:<port> with the CA `edgequorum certs` printed.
type Webhook struct {
	Address string
	LogPath string
	binary  string
	args    []string
	caPool  *x509.CertPool

	// cluster and registration are where Uninstall removes the webhook
	// configuration from.
	cluster      *testcluster.Cluster
	registration string

	mu   sync.Mutex
	proc *proc.Process
}

// Installs of the webhook StartWebhookFrom takes: the names of
// deploy/install files (deploy.Objects).
const (
	// WebhookInstall is deploy/webhook as shipped.
	WebhookInstall = "webhook"
	// WebhookFailoverInstall is deploy/webhook with components/failover:
	// the base's RBAC plus `delete pods`, which the failover
	// (--dead-node-action=out-of-service) needs to force-delete the pods its
	// taint evicted.
	WebhookFailoverInstall = "webhook-failover"
)

// installWebhookRBAC applies deploy/install/<install>.yaml's webhook
// namespace and RBAC (and deploy/agent's, which holds the zone Leases'
// namespace) and returns its MutatingWebhookConfiguration, not applied.
func installWebhookRBAC(ctx context.Context, c *testcluster.Cluster, install string) (*unstructured.Unstructured, error) {
	objs, err := deploy.Objects(install)
	if err != nil {
		return nil, fmt.Errorf("zonerun: webhook install %q: %w", install, err)
	}
	// The webhook's own namespace first, then RBAC.
	var namespace *unstructured.Unstructured
	var rbac []*unstructured.Unstructured
	var mwc *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			if o.GetName() == webhookNamespace {
				namespace = o
			}
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "CustomResourceDefinition":
			rbac = append(rbac, o)
		case "MutatingWebhookConfiguration":
			mwc = o
		}
	}
	if mwc == nil {
		return nil, fmt.Errorf("deploy/install/%s.yaml has no MutatingWebhookConfiguration", install)
	}
	if namespace == nil {
		return nil, fmt.Errorf("deploy/install/%s.yaml has no Namespace %s", install, webhookNamespace)
	}
	// edgequorum-system, which holds the zone Leases and the webhook's Role
	// to read them, comes with deploy/agent.
	if err := InstallAgentRBAC(ctx, c); err != nil {
		return nil, fmt.Errorf("install deploy/agent for the webhook: %w", err)
	}
	if err := deploy.Apply(ctx, c.RESTConfig(), append([]*unstructured.Unstructured{namespace}, rbac...), false); err != nil {
		return nil, fmt.Errorf("install deploy/install/%s.yaml: %w", install, err)
	}
	return mwc, nil
}

// StartWebhook installs deploy/webhook's namespace and RBAC, makes
// certificates with `edgequorum certs`, starts the webhook, waits until it is
// ready and registers it. extraArgs are added to its flags.
func StartWebhook(ctx context.Context, c *testcluster.Cluster, binary, dir string, extraArgs ...string) (*Webhook, error) {
	return StartWebhookFrom(ctx, c, WebhookInstall, binary, dir, extraArgs...)
}

// StartWebhookFrom is StartWebhook with the namespace, RBAC and webhook
// configuration of deploy/install/<install>.yaml (WebhookInstall,
// WebhookFailoverInstall), so a test runs the webhook with exactly the rights
// that install grants. Objects already on the cluster stay as they are, so an
// install after another adds what it grants beyond it. The flags the install's
// Deployment adds (such as --dead-node-action) are the caller's to pass in
// extraArgs.
func StartWebhookFrom(ctx context.Context, c *testcluster.Cluster, install, binary, dir string, extraArgs ...string) (*Webhook, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	mwc, err := installWebhookRBAC(ctx, c, install)
	if err != nil {
		return nil, err
	}
	userCfg, err := c.UserConfig(WebhookUser, "system:serviceaccounts", "system:serviceaccounts:"+webhookNamespace, "system:authenticated")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "webhook.kubeconfig")
	if err := WriteKubeconfig(userCfg, kubeconfig); err != nil {
		return nil, err
	}

	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	w := &Webhook{
		Address: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		LogPath: filepath.Join(dir, "webhook.log"),
		binary:  binary,
		cluster: c,
	}
	// A webhook that keeps its own certificates (--tls-secret with
	// --manage-certs, as the Deployment runs it) makes them itself, for
	// 127.0.0.1 too; otherwise `edgequorum certs` makes them, and the
	// configuration gets their CA.
	managed := slices.ContainsFunc(extraArgs, func(a string) bool { return strings.HasPrefix(a, "--tls-secret") })
	var caBundle string
	tlsArgs := []string{"--tls-ip-sans=127.0.0.1"}
	if !managed {
		certDir := filepath.Join(dir, "certs")
		out, err := exec.CommandContext(ctx, binary, "certs", "--out-dir", certDir, "--ip-sans", "127.0.0.1", "--force").Output()
		if err != nil {
			return nil, fmt.Errorf("edgequorum certs: %w", err)
		}
		caBundle = strings.TrimSpace(string(out))
		caPEM, err := os.ReadFile(filepath.Join(certDir, "ca.crt"))
		if err != nil {
			return nil, err
		}
		w.caPool = x509.NewCertPool()
		w.caPool.AppendCertsFromPEM(caPEM)
		tlsArgs = []string{"--tls-cert-file=" + filepath.Join(certDir, "tls.crt"), "--tls-key-file=" + filepath.Join(certDir, "tls.key")}
	}
	w.args = append(append([]string{"webhook",
		"--kubeconfig=" + kubeconfig,
		"--listen-address=" + w.Address,
	}, tlsArgs...),
		// As the Deployment does with $(POD_NAMESPACE).
		"--leader-election-namespace="+webhookNamespace,
		"--leader-election-identity=webhook-0",
		"--log-level=debug",
		// No Service stands in front of this process: nothing routes
		// reviews here that a drain would have to wait out, and Stop's
		// SIGKILL after 10 s would cut the drain short.
		"--shutdown-delay=0",
	)
	w.args = append(w.args, extraArgs...)
	// Point every webhook of the configuration at the local process.
	hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
	for i := range hooks {
		h := hooks[i].(map[string]any)
		cc := h["clientConfig"].(map[string]any)
		svc := cc["service"].(map[string]any)
		cc["url"] = "https://" + w.Address + svc["path"].(string)
		delete(cc, "service")
		if !managed {
			cc["caBundle"] = caBundle
		}
	}
	unstructured.SetNestedSlice(mwc.Object, hooks, "webhooks")
	if managed {
		// The webhook writes the caBundle into the configuration, which
		// must be there first; one it already wrote is kept.
		if err := register(ctx, c, mwc, true); err != nil {
			return nil, err
		}
		w.registration = mwc.GetName()
	}
	if err := w.Start(); err != nil {
		return nil, err
	}
	if err := w.WaitReady(ctx, time.Minute); err != nil {
		w.Stop()
		return nil, err
	}
	if !managed {
		if err := register(ctx, c, mwc, false); err != nil {
			w.Stop()
			return nil, err
		}
		w.registration = mwc.GetName()
	}
	return w, nil
}

// roots are the CAs to verify the webhook with: those `edgequorum certs`
// made, or the trust bundle of the Secret a webhook keeping its own
// certificates keeps (nil while there is none).
func (w *Webhook) roots(ctx context.Context) *x509.CertPool {
	if w.caPool != nil {
		return w.caPool
	}
	sec, err := w.cluster.Client().CoreV1().Secrets(webhookNamespace).Get(ctx, webhookTLSSecret, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(sec.Data["ca.crt"])
	return pool
}

// webhookTLSSecret is the Secret deploy/webhook serves from.
const webhookTLSSecret = "edgequorum-webhook-tls"

// Uninstall stops the webhook and removes its configuration, as an operator
// uninstalling it would: the cluster then behaves as upstream does, and the
// agents' verdict writes go through again. A test that only stops the
// webhook (Stop) sees a webhook that is down instead.
func (w *Webhook) Uninstall(ctx context.Context) error {
	w.Stop()
	err := w.cluster.Client().AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, w.registration, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("zonerun: remove webhook configuration %s: %w", w.registration, err)
	}
	return nil
}

// register creates the webhook configuration mwc, or replaces the one an
// earlier webhook of the same cluster registered: that one names the earlier
// process's address and CA, and a webhook with failurePolicy Fail (the agents'
// nodes/status writes) would refuse every write while it points there.
func register(ctx context.Context, c *testcluster.Cluster, mwc *unstructured.Unstructured, keepCABundle bool) error {
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mwc.Object, &cfg); err != nil {
		return fmt.Errorf("zonerun: webhook configuration %s: %w", mwc.GetName(), err)
	}
	api := c.Client().AdmissionregistrationV1().MutatingWebhookConfigurations()
	cur, err := api.Get(ctx, cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, &cfg, metav1.CreateOptions{})
	case err == nil:
		cfg.ResourceVersion = cur.ResourceVersion
		if keepCABundle {
			for i := range cfg.Webhooks {
				for _, h := range cur.Webhooks {
					if h.Name == cfg.Webhooks[i].Name {
						cfg.Webhooks[i].ClientConfig.CABundle = h.ClientConfig.CABundle
					}
				}
			}
		}
		_, err = api.Update(ctx, &cfg, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("zonerun: register webhook configuration %s: %w", cfg.Name, err)
	}
	return nil
}

// FreePort is a loopback TCP port free right now, for a component the caller
// starts next (there is a race, as with any such port).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts the webhook process.
func (w *Webhook) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc != nil && w.proc.Running() {
		return errors.New("webhook already running")
	}
	p, err := proc.Start(w.binary, w.args, w.LogPath)
	if err != nil {
		return err
	}
	w.proc = p
	return nil
}

// WaitReady polls /readyz until the webhook's caches synced.
func (w *Webhook) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: w.roots(ctx)}}}
		resp, err := client.Get("https://" + w.Address + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("readyz: %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("webhook not ready after %s: %w (log: %s)", timeout, last, w.LogPath)
}

// Metrics returns what the webhook's /metrics serves, in the text format.
func (w *Webhook) Metrics(ctx context.Context) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: w.roots(ctx)}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+w.Address+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("zonerun: webhook metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("zonerun: webhook metrics: %s: %v", resp.Status, err)
	}
	return string(b), nil
}

// Pid is the running webhook's process ID, 0 while it is stopped: for
// benchmarks that measure its CPU and memory.
func (w *Webhook) Pid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.proc == nil {
		return 0
	}
	return w.proc.Pid()
}

// LogTail returns the last n bytes of the webhook's log.
func (w *Webhook) LogTail(n int64) string { return logTail(w.LogPath, n) }

// Stop stops the webhook (SIGTERM, then SIGKILL after 10 s). Its registration
// stays, as when a real webhook is down: the hooks with failurePolicy Ignore
// admit everything unchanged, and the nodestatus hook (failurePolicy Fail)
// refuses the agents' verdict writes until a webhook answers again.
func (w *Webhook) Stop() {
	w.mu.Lock()
	p := w.proc
	w.proc = nil
	w.mu.Unlock()
	if p != nil {
		p.Stop(10 * time.Second)
	}
}
