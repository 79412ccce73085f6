package suite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// auditPolicy logs only the writes of the two systems under test, so the log
// stays small through hours of fake-kubelet heartbeats and can be re-read
// cheaply after every phase.
func auditPolicy(users ...string) string {
	var b bytes.Buffer
	// The agents' reachability check, a SelfSubjectReview, is a create that
	// stores nothing, one per check period as the GET /version before it.
	b.WriteString("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\", \"ResponseStarted\", \"Panic\"]\nrules:\n" +
		"- level: None\n  resources: [{group: authentication.k8s.io, resources: [selfsubjectreviews]}]\n- level: Metadata\n  users: [")
	for i, u := range users {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", u)
	}
	b.WriteString("]\n  verbs: [\"create\", \"update\", \"patch\", \"delete\", \"deletecollection\"]\n- level: None\n")
	return b.String()
}

// auditLog follows the apiserver's audit file from where it last stopped.
type auditLog struct {
	path string

	mu      sync.Mutex
	file    os.FileInfo // the file offset counts into, from the first poll that found one
	offset  int64
	partial []byte
	events  []testcluster.AuditEvent
}

// poll reads the lines appended since the last poll. The apiserver logs in
// blocking mode, so a write's event is on disk before its response is sent.
func (a *auditLog) poll() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.Open(a.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat audit log: %w", err)
	}
	// Seeking to the old offset in another file, or past the end of a
	// truncated one, would read from the middle of a line.
	if a.file != nil && !os.SameFile(a.file, st) {
		return fmt.Errorf("audit log %s was replaced by another file after %d bytes: rotated, events lost", a.path, a.offset)
	}
	if st.Size() < a.offset {
		return fmt.Errorf("audit log %s shrank from %d to %d bytes: rotated or truncated, events lost", a.path, a.offset, st.Size())
	}
	a.file = st
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return fmt.Errorf("seek audit log: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	a.offset += int64(len(data))
	data = append(a.partial, data...)
	end := bytes.LastIndexByte(data, '\n') + 1
	a.partial = append([]byte(nil), data[end:]...)
	for line := range bytes.Lines(data[:end]) {
		var e testcluster.AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("decode audit event: %w", err)
		}
		a.events = append(a.events, e)
	}
	return nil
}

// writes returns user's successful-or-not writes received in [from, to] whose
// resource is one of resources (all when empty).
func (a *auditLog) writes(user string, from, to time.Time, resources ...string) []testcluster.AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []testcluster.AuditEvent
	for _, e := range a.events {
		if e.User.Username != user || e.Received.Before(from) || e.Received.After(to) || e.ObjectRef == nil {
			continue
		}
		if len(resources) > 0 && !contains(resources, e.ObjectRef.Resource) {
			continue
		}
		out = append(out, e)
	}
	return out
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// succeeded counts events answered with 2xx.
func succeeded(es []testcluster.AuditEvent) int {
	n := 0
	for _, e := range es {
		if e.ResponseStatus != nil && e.ResponseStatus.Code < 300 {
			n++
		}
	}
	return n
}
