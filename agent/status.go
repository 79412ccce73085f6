package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgequorum/edgequorum/raftzone"
)

// statusSource is what the status server reads; *raftzone.Member implements it.
type statusSource interface {
	Status() raftzone.Status
	FetchLeaderStatus(ctx context.Context) (raftzone.Status, error)
}

// newStatusRouter serves the agent's operator endpoints. It is plain HTTP on
// --status-address and read-only: nothing here can change the zone. /healthz
// and /readyz are open, for the kubelet's probes; the zone's details
// (/v1/status, /v1/status/leader, /metrics) only to this node itself (loopback or
// the address the request came in on: `kubectl exec … edgequorum status` in the
// hostNetwork pod) and to allow, the --status-allow-cidrs networks.
func newStatusRouter(src statusSource, gatherer prometheus.Gatherer, allow []netip.Prefix) http.Handler {
	r := mux.NewRouter()
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	}).Methods(http.MethodGet)
	r.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		st := src.Status()
		if !st.Ready {
			http.Error(w, "not ready: joined="+boolString(st.Joined)+" leader="+st.Leader, http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}).Methods(http.MethodGet)
	local := localOnly(allow)
	r.Handle("/metrics", local(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))).Methods(http.MethodGet)
	r.Handle("/v1/status", local(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, src.Status())
	}))).Methods(http.MethodGet)
	leader := &leaderCache{src: src}
	r.Handle("/v1/status/leader", local(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		st, err := leader.get(req.Context())
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, st)
	}))).Methods(http.MethodGet)
	return r
}

// localOnly lets a request through when it comes from this node (loopback, or
// the very address it was sent to) or from an allowed network, and answers 403
// naming the flag otherwise.
func localOnly(allow []netip.Prefix) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if fromThisNode(r) || allowed(r, allow) {
				next.ServeHTTP(w, r)
				return
			}
			local := "?"
			if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
				local = la.String()
			}
			http.Error(w, fmt.Sprintf("the zone's details are readable from this node only (request from %s to %s); "+
				"allow other networks with --status-allow-cidrs", r.RemoteAddr, local), http.StatusForbidden)
		})
	}
}

func remoteAddr(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

// fromThisNode reports whether r came from an address of this node: loopback,
// the address it was sent to, or any other of the node's interfaces (the
// agent runs in the host network, so it sees them all; a node with several
// addresses may pick another as the source of a call to itself).
func fromThisNode(r *http.Request) bool {
	from, ok := remoteAddr(r)
	if !ok {
		return false
	}
	if from.IsLoopback() {
		return true
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if to, err := netip.ParseAddrPort(la.String()); err == nil && to.Addr().Unmap() == from {
			return true
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == from {
			return true
		}
	}
	return false
}

func allowed(r *http.Request, allow []netip.Prefix) bool {
	from, ok := remoteAddr(r)
	if !ok {
		return false
	}
	for _, p := range allow {
		if p.Contains(from) {
			return true
		}
	}
	return false
}

// leaderCache answers /v1/status/leader from one fetch a second at most, so
// callers cannot make the agent open a peer connection per request.
type leaderCache struct {
	src statusSource
	mu  sync.Mutex
	at  time.Time
	st  raftzone.Status
	err error
}

const leaderCacheFor = time.Second

func (c *leaderCache) get(ctx context.Context) (raftzone.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < leaderCacheFor {
		return c.st, c.err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c.st, c.err = c.src.FetchLeaderStatus(ctx)
	c.at = time.Now()
	return c.st, c.err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
