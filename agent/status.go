package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgequorum/edgequorum/raftzone"
)

// statusSource is what the status server reads; *raftzone.Server implements it.
type statusSource interface {
	Status() raftzone.Status
	FetchLeaderStatus(ctx context.Context) (raftzone.Status, error)
}

// newStatusRouter serves the agent's operator endpoints. It is plain HTTP on
// --status-address and read-only: nothing here can change the zone.
func newStatusRouter(src statusSource, gatherer prometheus.Gatherer) http.Handler {
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
	r.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})).Methods(http.MethodGet)
	r.HandleFunc("/v1/status", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, src.Status())
	}).Methods(http.MethodGet)
	r.HandleFunc("/v1/status/leader", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), 5*time.Second)
		defer cancel()
		st, err := src.FetchLeaderStatus(ctx)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, st)
	}).Methods(http.MethodGet)
	return r
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
