package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgequorum/edgequorum/internal/matrixsvg"
	"github.com/edgequorum/edgequorum/internal/promutil"
	"github.com/edgequorum/edgequorum/raftzone"
)

// statusSource is what the status server reads; *raftzone.Member implements it.
type statusSource interface {
	Status() raftzone.Status
	FetchLeaderStatus(ctx context.Context) (raftzone.Status, error)
	Matrix() (raftzone.MatrixView, error)
	FetchLeaderMatrix(ctx context.Context) (raftzone.MatrixView, error)
}

// newStatusRouter serves the agent's operator endpoints. It is plain HTTP on
// --status-address and read-only: nothing here can change the zone. /healthz
// and /readyz are open, for the kubelet's probes; the zone's details
// (/v1/status, /v1/status/leader, /metrics) only to this node itself (loopback or
// the address the request came in on: `kubectl exec … edgequorum status` in the
// hostNetwork pod) and to allow, the --status-allow-cidrs networks. So is the
// zone's opinion matrix, as JSON (/v1/status/matrix) and as a picture to open
// in a browser (/v1/status/matrix.svg), this member's or, under
// /v1/status/leader/, the leader's; and, with profiling, the Go runtime's
// goroutine, heap and allocation profiles (/debug/pprof/<name>) and a CPU
// profile (/debug/pprof/profile?seconds=N).
func newStatusRouter(src statusSource, gatherer prometheus.Gatherer, allow []netip.Prefix, profiling bool) http.Handler {
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
	r.Handle("/metrics", local(promutil.Handler(gatherer))).Methods(http.MethodGet)
	r.Handle("/v1/status", local(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, src.Status())
	}))).Methods(http.MethodGet)
	leader := &onceASecond[raftzone.Status]{fetch: src.FetchLeaderStatus}
	r.Handle("/v1/status/leader", local(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		st, err := leader.get(req.Context())
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, st)
	}))).Methods(http.MethodGet)
	own := &onceASecond[raftzone.MatrixView]{fetch: func(context.Context) (raftzone.MatrixView, error) { return src.Matrix() }}
	leaderMatrix := &onceASecond[raftzone.MatrixView]{fetch: src.FetchLeaderMatrix}
	for prefix, c := range map[string]*onceASecond[raftzone.MatrixView]{"/v1/status": own, "/v1/status/leader": leaderMatrix} {
		r.Handle(prefix+"/matrix", local(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			v, err := c.get(req.Context())
			if err != nil {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, v)
		}))).Methods(http.MethodGet)
		r.Handle(prefix+"/matrix.svg", local(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			v, err := c.get(req.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			// The picture holds names from the zone, not the agent's: it
			// may run no script and load nothing, whatever got into it.
			w.Header().Set("Content-Type", "image/svg+xml")
			w.Header().Set("Content-Security-Policy", "default-src 'none'")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			matrixsvg.Write(w, v) // a write error means the client went away
		}))).Methods(http.MethodGet)
	}
	if profiling {
		r.Handle("/debug/pprof/{profile:goroutine|heap|allocs}", local(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			writeProfile(w, req, mux.Vars(req)["profile"])
		}))).Methods(http.MethodGet)
		r.Handle("/debug/pprof/profile", local(http.HandlerFunc(writeCPUProfile))).Methods(http.MethodGet)
	}
	return r
}

// writeProfile writes the runtime profile name: gzipped protobuf for `go
// tool pprof`, or text with ?debug=1 (counts grouped by stack; for
// goroutines ?debug=2 is every stack). runtime/pprof alone, not
// net/http/pprof, whose HTML index would link html/template into the agent.
func writeProfile(w http.ResponseWriter, req *http.Request, name string) {
	debug := 0
	if d := req.URL.Query().Get("debug"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 2 {
			http.Error(w, fmt.Sprintf("debug=%q: want 0, 1 or 2", d), http.StatusBadRequest)
			return
		}
		debug = n
	}
	p := pprof.Lookup(name)
	if p == nil {
		http.Error(w, "no profile "+name, http.StatusNotFound)
		return
	}
	if name == "heap" || name == "allocs" {
		runtime.GC() // the heap as of now, not as of the last collection
	}
	if debug == 0 {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.pb.gz"`)
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	_ = p.WriteTo(w, debug) // a write error means the client went away
}

// maxCPUProfile bounds ?seconds= of a CPU profile: the answer must be
// written within the status server's write timeout (15 s) of the request.
const maxCPUProfile = 10 * time.Second

// writeCPUProfile samples where the agent spends its CPU for ?seconds= (at
// most maxCPUProfile, the default) and writes it for `go tool pprof`. A
// second request while one runs gets 409: the runtime has one CPU profiler.
func writeCPUProfile(w http.ResponseWriter, req *http.Request) {
	d := maxCPUProfile
	if v := req.URL.Query().Get("seconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || time.Duration(n)*time.Second > maxCPUProfile {
			http.Error(w, fmt.Sprintf("seconds=%q: want 1 to %d", v, int(maxCPUProfile/time.Second)), http.StatusBadRequest)
			return
		}
		d = time.Duration(n) * time.Second
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		http.Error(w, "CPU profile: "+err.Error(), http.StatusConflict)
		return
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-req.Context().Done():
		t.Stop()
	}
	pprof.StopCPUProfile()
	if req.Context().Err() != nil {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="profile.pb.gz"`)
	_, _ = w.Write(buf.Bytes()) // a write error means the client went away
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

// onceASecond answers from one fetch a second at most, so callers cannot make
// the agent open a peer connection per request (/v1/status/leader), nor read
// a zone of 129's 16k cells per request (the matrix).
type onceASecond[T any] struct {
	fetch func(context.Context) (T, error)
	mu    sync.Mutex
	at    time.Time
	v     T
	err   error
}

const fetchCacheFor = time.Second

func (c *onceASecond[T]) get(ctx context.Context) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < fetchCacheFor {
		return c.v, c.err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c.v, c.err = c.fetch(ctx)
	c.at = time.Now()
	return c.v, c.err
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
