package testcluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// WriteAuditPolicy records every write request once, when its response is
// complete, at Metadata level. Set it as Options.AuditPolicy to count the writes
// a component makes (for example: one zone Lease renewal instead of one write
// per node).
const WriteAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// AuditEvent is the part of an audit.k8s.io/v1 Event that tests need to tell
// who wrote what. The apiserver module is not a dependency of this one, so the
// type is declared here rather than imported.
type AuditEvent struct {
	Stage string    `json:"stage"`
	Verb  string    `json:"verb"`
	User  AuditUser `json:"user"`
	// ImpersonatedUser is who User acted as, when it impersonated.
	ImpersonatedUser *AuditUser           `json:"impersonatedUser,omitempty"`
	ObjectRef        *AuditObjectRef      `json:"objectRef,omitempty"`
	ResponseStatus   *AuditResponseStatus `json:"responseStatus,omitempty"`
	UserAgent        string               `json:"userAgent"`
	Received         time.Time            `json:"requestReceivedTimestamp"`
}

// AuditUser is the authenticated identity of a request.
type AuditUser struct {
	Username string   `json:"username"`
	Groups   []string `json:"groups"`
}

// AuditObjectRef names the object a request was about.
type AuditObjectRef struct {
	Resource    string `json:"resource"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	APIGroup    string `json:"apiGroup"`
	Subresource string `json:"subresource"`
}

// AuditResponseStatus carries the HTTP code of the response.
type AuditResponseStatus struct {
	Code int `json:"code"`
}

// ErrNoAuditLog means Options.AuditPolicy was empty, so nothing is audited.
var ErrNoAuditLog = errors.New("cluster started without Options.AuditPolicy")

// AuditEvents reads every event the apiserver has logged so far. With the
// blocking log mode the harness uses, an event is on disk before its response
// reaches the client.
func (c *Cluster) AuditEvents() ([]AuditEvent, error) {
	if c.auditLog == "" {
		return nil, fmt.Errorf("testcluster: reading audit log: %w", ErrNoAuditLog)
	}
	data, err := os.ReadFile(c.auditLog)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("testcluster: reading audit log: %w", err)
	}
	// The apiserver may be halfway through a line; everything up to the last
	// newline is complete.
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var events []AuditEvent
	for line := range bytes.Lines(data) {
		var e AuditEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return events, fmt.Errorf("testcluster: decoding audit event: %w", err)
		}
		events = append(events, e)
	}
	return events, nil
}
