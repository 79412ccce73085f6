package fleet

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// auditPolicy logs every request but watches (which only start), at the
// Metadata level: who, what verb, which resource.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: None
  verbs: ["watch"]
- level: Metadata
`

// auditEvent is what the count needs of an audit.k8s.io/v1 Event.
type auditEvent = testcluster.AuditEvent

// Who made a request: the sources the results compare.
const (
	whoKubelet    = "kubelets"
	whoEdgequorum = "agents"
	whoWebhook    = "webhook"
	whoKCM        = "controller-manager"
	whoOther      = "other"
)

// Kinds of request.
const (
	kindWrite  = "write"
	kindRead   = "read"
	kindReview = "review" // creates that store nothing (SelfSubjectReview)
)

// countKey is one cell of the count.
type countKey struct {
	Who, Kind, Resource string
}

// classify says who made e and what kind of request it was.
func classify(e *auditEvent) (who, kind, resource string) {
	user := e.User.Username
	if e.ImpersonatedUser != nil {
		user = e.ImpersonatedUser.Username
	}
	switch {
	case strings.HasPrefix(user, "system:node:"):
		who = whoKubelet
	case user == agentUser:
		who = whoEdgequorum
	case strings.Contains(user, "edgequorum-webhook"):
		who = whoWebhook
	case user == "system:kube-controller-manager" || strings.HasPrefix(user, "system:serviceaccount:kube-system:"):
		who = whoKCM
	default:
		who = whoOther
	}
	if e.ObjectRef != nil {
		resource = e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		if resource == "leases" && e.ObjectRef.Namespace == "kube-node-lease" {
			resource = "leases (node)"
		}
	}
	switch e.Verb {
	case "get", "list", "watch":
		kind = kindRead
	default:
		kind = kindWrite
	}
	if strings.HasPrefix(resource, "self") || strings.HasSuffix(resource, "reviews") {
		kind = kindReview
	}
	return who, kind, resource
}

// countAudit counts the requests in the audit log at path, from byte offset
// on, that the apiserver received in [from, to).
func countAudit(path string, offset int64, from, to time.Time) (map[countKey]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seek audit log: %w", err)
	}
	out := map[countKey]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // the line being written at the end
		}
		if e.Received.Before(from) || !e.Received.Before(to) {
			continue
		}
		who, kind, res := classify(&e)
		out[countKey{who, kind, res}]++
	}
	return out, sc.Err()
}
