package apiwriter

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
)

// cachingProxy stands in for an edge API proxy such as OpenYurt's yurthub or
// SuperEdge's lite-apiserver: it forwards every request to the apiserver
// under its own credentials and keeps the answer to every GET. Cut off from
// the cloud it answers GETs it has seen (GET /version among them) from that
// cache and refuses everything else with an error of its own making, a 403
// Status, the kind of answer a write used to count as "the apiserver
// answered".
type cachingProxy struct {
	target   *url.URL
	upstream http.RoundTripper
	cut      atomic.Bool
	// fromCache counts the GETs answered from the cache while cut, refused
	// the other requests.
	fromCache, refused atomic.Int64

	mu    sync.Mutex
	cache map[string]cachedAnswer
}

type cachedAnswer struct {
	contentType string
	body        []byte
}

func (p *cachingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.URL.RequestURI()
	if p.cut.Load() {
		p.mu.Lock()
		a, ok := p.cache[key]
		p.mu.Unlock()
		if r.Method == http.MethodGet && ok {
			p.fromCache.Add(1)
			w.Header().Set("Content-Type", a.contentType)
			_, _ = w.Write(a.body)
			return
		}
		p.refused.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"offline: request not cached","reason":"Forbidden","code":403}`)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target.JoinPath(r.URL.Path).String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.URL.RawQuery = r.URL.RawQuery
	for _, h := range []string{"Content-Type", "Accept"} {
		if v := r.Header.Get(h); v != "" {
			out.Header.Set(h, v)
		}
	}
	resp, err := p.upstream.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if r.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		p.mu.Lock()
		p.cache[key] = cachedAnswer{contentType: resp.Header.Get("Content-Type"), body: answer}
		p.mu.Unlock()
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// startCachingProxy serves a cachingProxy for c's apiserver over TLS on
// loopback, with a serving certificate from c's CA, and returns it with a
// full client and the agent's narrow one, both going through it.
func startCachingProxy(t *testing.T, c *testcluster.Cluster) (*cachingProxy, kubernetes.Interface, kubeclient.Interface) {
	t.Helper()
	upstream, err := rest.TransportFor(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(c.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	p := &cachingProxy{target: target, upstream: upstream, cache: map[string]cachedAnswer{}}
	certPEM, keyPEM, err := c.IssueServingCert("edge-api-proxy", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := &rest.Config{
		Host:            srv.URL,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CACertPEM()},
		Timeout:         5 * time.Second,
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := kubeclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, client, narrow
}

// TestReachabilityBehindCachingProxy: an agent that reaches the apiserver
// through an edge API proxy counts the apiserver unreachable once the proxy
// is cut off from it, although the proxy still answers GET /version and the
// reads it has seen from its cache; and reachable again once the link is
// back. Before, the health check was GET /version, which the proxy answered,
// and any error a write got back counted as an answer of the apiserver.
func TestReachabilityBehindCachingProxy(t *testing.T) {
	c := testcluster.StartT(t, testcluster.Options{NoCloudNode: true})
	ctx := t.Context()
	if _, err := c.Client().CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	proxy, client, narrow := startCachingProxy(t, c)
	// What a cache will hold: the version and the node the writer reads.
	if _, err := client.Discovery().ServerVersion(); err != nil {
		t.Fatalf("GET /version through the proxy: %v", err)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Fatalf("GET the node through the proxy: %v", err)
	}

	fence := &fakeFence{}
	fence.term.Store(2)
	cfg := DefaultConfig()
	cfg.Zone, cfg.Node, cfg.NodeKey = "zone-a", "node-1", testNodeKey
	cfg.HealthPeriod = 100 * time.Millisecond
	w, err := New(cfg, narrow, fence, fixedMembers(3))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { <-done })
	poll.UntilTrue(t, time.Minute, "the apiserver reachable through the proxy", w.Reachable)

	proxy.cut.Store(true)
	poll.UntilTrue(t, time.Minute, "the apiserver unreachable once the proxy is cut off", func() bool { return !w.Reachable() })
	// The proxy still answers what the old health check asked, and the
	// reads the writer makes; neither brings reachability back.
	if _, err := client.Discovery().ServerVersion(); err != nil {
		t.Fatalf("the cut-off proxy does not answer GET /version from its cache: %v", err)
	}
	w.Verdicts(2, []zone.Verdict{{Node: "n1", State: zone.Healthy, Term: 2, Leader: "node-1", DecidedAt: time.Now()}}, false)
	poll.UntilTrue(t, time.Minute, "the writer's read of n1 answered from the cache", func() bool { return proxy.fromCache.Load() >= 2 })
	// Twenty refused requests on (health checks, the writer's retries):
	// the proxy's answers never make the apiserver look reachable.
	refused := proxy.refused.Load()
	poll.UntilTrue(t, time.Minute, "twenty more requests refused by the proxy", func() bool {
		if w.Reachable() {
			t.Fatalf("the apiserver counts as reachable while only the cut-off proxy answers (%d answers from its cache)", proxy.fromCache.Load())
		}
		return proxy.refused.Load() >= refused+20
	})
	if w.Pending() != 1 {
		t.Errorf("%d verdicts pending while cut off, want 1", w.Pending())
	}

	proxy.cut.Store(false)
	poll.UntilTrue(t, time.Minute, "the apiserver reachable again", w.Reachable)
	poll.UntilTrue(t, time.Minute, "the pending verdict written", func() bool { return w.Pending() == 0 })
	n, err := c.Client().CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := zone.ParseAnnotation(n.Annotations[zone.AnnotationKey]); err != nil || a.State != zone.Healthy || a.Term != 2 {
		t.Errorf("verdict after the link came back: %+v (%v), want healthy, term 2", a, err)
	}
	t.Logf("the cut-off proxy answered %d GETs from its cache", proxy.fromCache.Load())
}
