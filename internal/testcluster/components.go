package testcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/edgequorum/edgequorum/internal/proc"
)

// ServiceClusterIPRange is the cluster's Service range. Outside realnode's
// namespace nothing routes it; it only has to be valid and disjoint from the
// pod ranges (see podCIDR).
const ServiceClusterIPRange = "10.0.0.0/24"

// Fixed names inside the cluster.
const (
	serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
	adminUser            = "edgequorum-admin"
	kcmUser              = "system:kube-controller-manager"
	frontProxyClient     = "front-proxy-client"
	kubeletClientUser    = "kube-apiserver-kubelet-client"
)

// errPortInUse marks a start failure caused by another process taking a port
// between freePorts and the component's bind.
var errPortInUse = errors.New("port already in use")

// Files under the cluster directory.
func (c *Cluster) path(name string) string { return filepath.Join(c.dir, name) }

// writePKI writes everything the components read at start-up: the CA, the
// apiserver's serving certificate, the service-account key pair and the static
// token file that authenticates the admin and KCM.
func (c *Cluster) writePKI() error {
	p, err := newPKI("edgequorum-testcluster-ca")
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	c.pki = p
	// A front-proxy CA of its own, as kubeadm sets up: without a request-header
	// CA in kube-system/extension-apiserver-authentication, every component
	// doing delegated authentication (KCM here, later the webhook) logs an
	// error about it in a loop. Sharing the client CA would let any client
	// certificate assert identities through headers.
	frontProxy, err := newPKI("edgequorum-testcluster-front-proxy-ca")
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	proxyClient, err := frontProxy.clientCert(frontProxyClient, nil)
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	servingIPs := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)}
	if c.opts.nodeNetwork() {
		servingIPs = append(servingIPs, net.IP(c.opts.AdvertiseAddress.AsSlice()))
	}
	serving, err := p.servingCert("kube-apiserver", servingIPs,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	saPriv, saPub, err := serviceAccountKey()
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	c.adminToken, err = randomToken()
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	kcmToken, err := randomToken()
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	// token,user,uid,"group1,group2"
	tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n%s,%s,%s\n",
		c.adminToken, adminUser, adminUser, kcmToken, kcmUser, kcmUser)
	files := map[string][]byte{
		"ca.crt":                 p.certPEM,
		"ca.key":                 p.keyPEM,
		"apiserver.crt":          serving.certPEM,
		"apiserver.key":          serving.keyPEM,
		"sa.key":                 saPriv,
		"sa.pub":                 saPub,
		"tokens.csv":             []byte(tokens),
		"kcm-token.txt":          []byte(kcmToken),
		"admin-token.txt":        []byte(c.adminToken),
		"front-proxy-ca.crt":     frontProxy.certPEM,
		"front-proxy-client.crt": proxyClient.certPEM,
		"front-proxy-client.key": proxyClient.keyPEM,
	}
	if c.opts.nodeNetwork() {
		// The apiserver's identity towards kubelets (exec, logs, port-forward).
		// system:masters passes the kubelet's webhook authorization without a
		// binding, as kubeadm's apiserver-kubelet-client did for years.
		kc, err := p.clientCert(kubeletClientUser, []string{"system:masters"})
		if err != nil {
			return fmt.Errorf("testcluster: %w", err)
		}
		files["apiserver-kubelet-client.crt"] = kc.certPEM
		files["apiserver-kubelet-client.key"] = kc.keyPEM
	}
	for name, data := range files {
		if err := os.WriteFile(c.path(name), data, 0o600); err != nil {
			return fmt.Errorf("testcluster: writing %s: %w", name, err)
		}
	}
	if c.opts.AuditPolicy != "" {
		if err := os.WriteFile(c.path("audit-policy.yaml"), []byte(c.opts.AuditPolicy), 0o600); err != nil {
			return fmt.Errorf("testcluster: writing audit policy: %w", err)
		}
		c.auditLog = c.path("audit.log")
	}
	return nil
}

// startComponents starts etcd, the apiserver and KCM on fresh ports and waits for
// each; it is the unit Start retries after a port race.
func (c *Cluster) startComponents(ctx context.Context) error {
	ports, err := freePorts(4)
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	etcdClient, etcdPeer, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]

	if err := c.startEtcd(ctx, etcdClient, etcdPeer); err != nil {
		return err
	}
	if err := c.startAPIServer(ctx, apiPort, etcdClient); err != nil {
		return err
	}
	if err := c.startKCM(ctx, kcmPort); err != nil {
		return err
	}
	if !c.opts.Scheduler {
		return nil
	}
	return c.startScheduler(ctx)
}

// startScheduler runs kube-scheduler as system:kube-scheduler, which the
// bootstrap RBAC policy binds, with a client certificate from the cluster CA.
func (c *Cluster) startScheduler(ctx context.Context) error {
	const name = "kube-scheduler"
	if _, err := os.Stat(filepath.Join(c.binDir, name)); err != nil {
		return fmt.Errorf("testcluster: Options.Scheduler needs %s (run `make noderuntime`): %w", filepath.Join(c.binDir, name), err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	cfg, err := c.UserConfig("system:kube-scheduler")
	if err != nil {
		return err
	}
	kc := c.path("kube-scheduler.kubeconfig")
	if err := writeKubeconfigAuth(kc, cfg.Host, cfg.CAData, "system:kube-scheduler",
		&clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}); err != nil {
		return err
	}
	p, err := c.startProcess(name, []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[0]),
		"--cert-dir=" + c.path("kube-scheduler-certs"),
		"--leader-elect=false",
	})
	if err != nil {
		return err
	}
	c.scheduler = p
	// It serves a self-signed certificate; only liveness is asked of it.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	healthURL := fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])
	return c.waitReady(ctx, p, func(ctx context.Context) error {
		_, err := httpGet(ctx, hc, healthURL)
		return err
	})
}

func (c *Cluster) startEtcd(ctx context.Context, clientPort, peerPort int) error {
	dataDir := c.path("etcd")
	// A previous attempt's member ID would not match the new peer URL.
	if err := os.RemoveAll(dataDir); err != nil {
		return fmt.Errorf("testcluster: clearing etcd data dir: %w", err)
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	args := []string{
		"--name=testcluster",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testcluster=" + peerURL,
		"--initial-cluster-state=new",
		// The data is thrown away with the cluster; fsync only slows tests down.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
	args = append(args, c.opts.ExtraEtcdArgs...)
	p, err := c.startProcess("etcd", args)
	if err != nil {
		return err
	}
	c.etcd = p
	hc := &http.Client{}
	return c.waitReady(ctx, p, func(ctx context.Context) error {
		body, err := httpGet(ctx, hc, clientURL+"/health")
		if err != nil {
			return err
		}
		var h struct {
			Health string `json:"health"`
		}
		if err := json.Unmarshal(body, &h); err != nil {
			return fmt.Errorf("decoding etcd health %q: %w", body, err)
		}
		if h.Health != "true" {
			return fmt.Errorf("etcd health: %s", body)
		}
		return nil
	})
}

func (c *Cluster) startAPIServer(ctx context.Context, port, etcdPort int) error {
	host := "127.0.0.1"
	if c.opts.nodeNetwork() {
		host = c.opts.AdvertiseAddress.String()
	}
	args := []string{
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort),
		"--bind-address=" + host,
		fmt.Sprintf("--secure-port=%d", port),
		"--advertise-address=" + host,
		"--cert-dir=" + c.path("apiserver-certs"),
		"--tls-cert-file=" + c.path("apiserver.crt"),
		"--tls-private-key-file=" + c.path("apiserver.key"),
		"--client-ca-file=" + c.path("ca.crt"),
		"--token-auth-file=" + c.path("tokens.csv"),
		"--requestheader-client-ca-file=" + c.path("front-proxy-ca.crt"),
		"--requestheader-allowed-names=" + frontProxyClient,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + c.path("front-proxy-client.crt"),
		"--proxy-client-key-file=" + c.path("front-proxy-client.key"),
		// Node authorizes the fake kubelets exactly as it would real ones, and
		// NodeRestriction keeps each of them to its own Node, Lease and pods.
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + c.path("sa.pub"),
		"--service-account-signing-key-file=" + c.path("sa.key"),
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--allow-privileged=true",
	}
	if c.opts.nodeNetwork() {
		args = append(args,
			// Pods of a real node reach the apiserver through the "kubernetes"
			// Service, so its endpoints must carry the advertise address.
			"--endpoint-reconciler-type=lease",
			"--kubelet-client-certificate="+c.path("apiserver-kubelet-client.crt"),
			"--kubelet-client-key="+c.path("apiserver-kubelet-client.key"),
			"--kubelet-certificate-authority="+c.path("ca.crt"),
			// A node's Hostname address is its name, which nothing resolves.
			"--kubelet-preferred-address-types=InternalIP",
			// Webhooks and aggregated APIs are reached at their endpoint (pod)
			// IPs: the apiserver has no kube-proxy rules for ClusterIPs.
			"--enable-aggregator-routing=true",
		)
	} else {
		// The "kubernetes" Service's endpoints would carry the 127.0.0.1
		// advertise address, which EndpointSlice validation rejects; no pod
		// here talks to the apiserver through the Service anyway.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	if v := c.opts.DefaultNotReadyTolerationSeconds; v > 0 {
		args = append(args, "--default-not-ready-toleration-seconds="+strconv.FormatInt(v, 10))
	}
	if v := c.opts.DefaultUnreachableTolerationSeconds; v > 0 {
		args = append(args, "--default-unreachable-toleration-seconds="+strconv.FormatInt(v, 10))
	}
	if c.auditLog != "" {
		args = append(args,
			"--audit-policy-file="+c.path("audit-policy.yaml"),
			"--audit-log-path="+c.auditLog,
			"--audit-log-format=json",
			// Blocking writes each event before the response, so a test that
			// reads the log after a request sees that request.
			"--audit-log-mode=blocking",
			// One file that never rotates: the apiserver's default
			// rotates it at 100 MB, which an hour of a large zone's
			// writes reaches, and readers follow it by offset.
			"--audit-log-maxsize=0",
		)
	}
	args = append(args, c.opts.ExtraAPIServerArgs...)
	p, err := c.startProcess("kube-apiserver", args)
	if err != nil {
		return err
	}
	c.apiserver = p
	c.apiURL = "https://" + net.JoinHostPort(host, strconv.Itoa(port))
	c.restConfig = &rest.Config{
		Host:            c.apiURL,
		BearerToken:     c.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.certPEM},
		QPS:             100,
		Burst:           200,
		UserAgent:       "edgequorum-testcluster",
	}
	client, err := kubernetes.NewForConfig(c.restConfig)
	if err != nil {
		return fmt.Errorf("testcluster: admin client: %w", err)
	}
	c.client = client
	if err := c.waitReady(ctx, p, func(ctx context.Context) error {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	}); err != nil {
		return err
	}
	c.kubeconfig = c.path("admin.kubeconfig")
	if err := writeKubeconfig(c.kubeconfig, c.apiURL, c.pki.certPEM, adminUser, c.adminToken); err != nil {
		return err
	}
	return nil
}

func (c *Cluster) startKCM(ctx context.Context, port int) error {
	kcmToken, err := os.ReadFile(c.path("kcm-token.txt"))
	if err != nil {
		return fmt.Errorf("testcluster: %w", err)
	}
	kubeconfig := c.path("kcm.kubeconfig")
	if err := writeKubeconfig(kubeconfig, c.apiURL, c.pki.certPEM, kcmUser, string(kcmToken)); err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + c.path("kcm-certs"),
		// One KCM: an election only delays start-up and adds Lease writes that
		// would blur write counts.
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + c.path("sa.key"),
		"--root-ca-file=" + c.path("ca.crt"),
		"--cluster-signing-cert-file=" + c.path("ca.crt"),
		"--cluster-signing-key-file=" + c.path("ca.key"),
		"--service-cluster-ip-range=" + ServiceClusterIPRange,
		"--controllers=" + strings.Join(c.opts.Controllers, ","),
		"--node-monitor-grace-period=" + c.opts.NodeMonitorGracePeriod.String(),
	}
	if d := c.opts.NodeMonitorPeriod; d > 0 {
		args = append(args, "--node-monitor-period="+d.String())
	}
	if d := c.opts.NodeStartupGracePeriod; d > 0 {
		args = append(args, "--node-startup-grace-period="+d.String())
	}
	if r := c.opts.NodeEvictionRate; r > 0 {
		args = append(args, "--node-eviction-rate="+strconv.FormatFloat(r, 'g', -1, 64))
	}
	args = append(args, c.opts.ExtraKCMArgs...)
	p, err := c.startProcess("kube-controller-manager", args)
	if err != nil {
		return err
	}
	c.kcm = p
	// KCM serves a self-signed certificate from --cert-dir; only liveness is
	// asked of it here.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	healthURL := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	return c.waitReady(ctx, p, func(ctx context.Context) error {
		if _, err := httpGet(ctx, hc, healthURL); err != nil {
			return err
		}
		// The default ServiceAccount proves the controllers run and, until it
		// exists, the ServiceAccount admission plugin rejects pods.
		_, err := c.client.CoreV1().ServiceAccounts(corev1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

func (c *Cluster) startProcess(name string, args []string) (*proc.Group, error) {
	p, err := proc.StartGroup(name, filepath.Join(c.binDir, name), args, nil, filepath.Join(c.LogDir(), name+".log"))
	if err != nil {
		return nil, fmt.Errorf("testcluster: %w", err)
	}
	c.log.Info("started", "component", name, "pid", p.Pid())
	return p, nil
}

// waitReady wraps proc.Group.WaitReady and classifies a lost port race.
func (c *Cluster) waitReady(ctx context.Context, p *proc.Group, check func(context.Context) error) error {
	err := p.WaitReady(ctx, c.opts.StartTimeout, check)
	if err == nil {
		c.log.Info("ready", "component", p.Name())
		return nil
	}
	if exited, _ := p.Exited(); exited && strings.Contains(proc.TailFile(p.LogPath(), 50), "address already in use") {
		return fmt.Errorf("testcluster: %w: %w", errPortInUse, err)
	}
	return fmt.Errorf("testcluster: %w", err)
}

func httpGet(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}

// writeKubeconfig writes a single-context kubeconfig that authenticates with a
// bearer token and trusts the cluster CA.
func writeKubeconfig(path, server string, caPEM []byte, user, token string) error {
	return writeKubeconfigAuth(path, server, caPEM, user, &clientcmdapi.AuthInfo{Token: token})
}

// writeKubeconfigAuth writes a kubeconfig for user authenticating with auth.
func writeKubeconfigAuth(path, server string, caPEM []byte, user string, auth *clientcmdapi.AuthInfo) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = auth
	cfg.Contexts["testcluster"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: user}
	cfg.CurrentContext = "testcluster"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("testcluster: writing kubeconfig %s: %w", path, err)
	}
	return nil
}
