package raftzone

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/edgequorum/edgequorum/zoneport"
)

// The peer API runs on the authenticated zone port only, so every handler may
// assume the caller holds the zone key. It never trusts the body beyond that:
// reports carry their own MAC and joins are checked against the member list.

const (
	maxPeerBody = 1 << 20
	// headerLeader carries the leader's zone-port address on a 421 answer so a
	// caller can retry at the right member without another round trip.
	headerLeader = "X-Edgequorum-Leader"
)

// PeerError is a non-2xx answer from a zone peer.
type PeerError struct {
	Status int
	// Reason is a short machine-readable cause (e.g. "replay", "bad_mac").
	Reason  string
	Message string
	// Leader is the leader's address when the peer is not the leader.
	Leader string
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("peer answered %d %s: %s", e.Status, e.Reason, e.Message)
}

type errorBody struct {
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

func (s *Member) peerRouter() http.Handler {
	r := mux.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			s.metrics.peerRequests.WithLabelValues("in").Inc()
			next.ServeHTTP(w, req)
		})
	})
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	}).Methods(http.MethodGet)
	r.HandleFunc("/v1/reports", s.handleReport).Methods(http.MethodPost)
	r.HandleFunc("/v1/join", s.handleJoin).Methods(http.MethodPost)
	r.HandleFunc("/v1/status", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Status())
	}).Methods(http.MethodGet)
	r.HandleFunc("/v1/view", s.handleView).Methods(http.MethodGet)
	r.HandleFunc("/v1/matrix", s.handleMatrix).Methods(http.MethodGet)
	r.HandleFunc("/v1/attest", s.handleAttest).Methods(http.MethodPost)
	r.HandleFunc("/v1/leader-vote", s.handleLeaderVote).Methods(http.MethodPost)
	r.HandleFunc("/v1/replica", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.replica())
	}).Methods(http.MethodGet)
	return r
}

// peerServer serves the peer API on the zone port.
func (s *Member) peerServer() *http.Server {
	return zoneport.NewPeerServer(s.peerRouter(), slog.NewLogLogger(s.log.Handler(), slog.LevelDebug))
}

// refuseCaller answers a request whose body speaks for someone other than its
// authenticated caller, and counts it by endpoint.
func (s *Member) refuseCaller(w http.ResponseWriter, endpoint string, err error) {
	s.metrics.callerRefused.WithLabelValues(endpoint).Inc()
	s.log.Warn("peer request refused: not the caller's own", "endpoint", endpoint, "err", err)
	s.writeError(w, http.StatusForbidden, "not_caller", err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Member) writeError(w http.ResponseWriter, status int, reason string, err error) {
	if status == http.StatusMisdirectedRequest {
		if _, addr, ok := s.Leader(); ok {
			w.Header().Set(headerLeader, addr)
		}
	}
	writeJSON(w, status, errorBody{Reason: reason, Error: err.Error()})
}

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxPeerBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode request body: %w", err)
	}
	return nil
}

// callPeer POSTs (or GETs, when in is nil) JSON to a peer and decodes the answer.
func (s *Member) callPeer(ctx context.Context, address, path string, in, out any) error {
	return s.callPeerLimit(ctx, address, path, in, out, maxPeerBody)
}

// callPeerLimit is callPeer for an answer of up to limit bytes.
func (s *Member) callPeerLimit(ctx context.Context, address, path string, in, out any, limit int64) error {
	method, body := http.MethodGet, io.Reader(nil)
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		method, body = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+address+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	s.metrics.peerRequests.WithLabelValues("out").Inc()
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return fmt.Errorf("read answer of %s%s: %w", address, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var eb errorBody
		json.Unmarshal(raw, &eb)
		return &PeerError{Status: resp.StatusCode, Reason: eb.Reason, Message: eb.Error, Leader: resp.Header.Get(headerLeader)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode answer of %s%s: %w", address, path, err)
	}
	return nil
}

// FetchLeaderStatus returns the leader's view of the zone, asking the leader over
// the peer API when this member is a follower.
func (s *Member) FetchLeaderStatus(ctx context.Context) (Status, error) {
	if s.Term() != 0 {
		return s.Status(), nil
	}
	_, addr, ok := s.Leader()
	if !ok {
		return Status{}, errors.New("no zone leader is known")
	}
	var st Status
	if err := s.callPeer(ctx, addr, "/v1/status", nil, &st); err != nil {
		return Status{}, fmt.Errorf("fetch status from leader %s: %w", addr, err)
	}
	return st, nil
}
