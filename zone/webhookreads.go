package zone

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgequorum/edgequorum/skew"
)

// What the webhook reads, told to the zone leaders that write for it: every
// webhook replica keeps an entry in one Lease of the webhook's namespace,
// WebhookReadsLease, under WebhookReadsAnnotation, saying the release it
// runs and the highest format level it reads; LeaseFormatAnnotation says the
// level of the Lease's own format (WebhookReadsFormat). A leader writes a verdict or
// zone Lease format of a level above skew.Oldest only while every entry
// reads it (WebhookLevel): a webhook replica of N−1, still serving in a
// roll or put back by a rollback, would refuse it as newer.
//
// Only the webhook writes the Lease (agents may only read it); replicas
// add their entry at start, renew it, remove it when they stop, and prune
// entries a crashed replica left behind, by the cloud's clock. Readers never
// judge an entry's age by their own clock: dropping an entry can only raise
// the level, and an edge clock that runs ahead would drop a live replica's.

const (
	// WebhookReadsLease names the Lease, in the webhook's namespace.
	WebhookReadsLease = "edgequorum-webhook-reads"
	// WebhookReadsAnnotation holds the replicas' entries, as JSON: replica
	// name to WebhookReplica.
	WebhookReadsAnnotation = "edgequorum.io/reads"
	// DefaultWebhookNamespace is where the webhook runs, as deploy/webhook
	// installs it.
	DefaultWebhookNamespace = "edgequorum-webhook"
	// WebhookReadsFormat is the level of the reads Lease's format: a
	// reader of a lower level refuses it, and its leader writes the oldest
	// formats.
	WebhookReadsFormat = skew.Level1
	// MaxWebhookReplicas bounds the entries a reader accepts: a Deployment
	// of a few replicas, and those that crashed in the last minutes.
	MaxWebhookReplicas = 64
	// maxWebhookReads bounds the annotation a reader parses.
	maxWebhookReads = 16 << 10
)

// WebhookReplica is one replica's entry.
type WebhookReplica struct {
	// Level is the highest format level the replica reads.
	Level skew.Level `json:"level"`
	// Release is the release it runs, for operators (preflight).
	Release string `json:"release"`
	// At is when the replica last renewed the entry, by its own clock.
	At time.Time `json:"at"`
}

// ParseWebhookReads decodes the entries from the reads Lease's annotations
// (none when it holds none). A newer format (an error wrapping
// skew.ErrTooNew), a value out of bounds or an entry that does not validate
// is an error: the caller then writes the oldest formats.
func ParseWebhookReads(annotations map[string]string) (map[string]WebhookReplica, error) {
	if _, err := parseFormatLevel(annotations[LeaseFormatAnnotation], skew.UpgradeMember); err != nil {
		return nil, fmt.Errorf("lease %s: %w", WebhookReadsLease, err)
	}
	s := annotations[WebhookReadsAnnotation]
	if s == "" {
		return map[string]WebhookReplica{}, nil
	}
	if len(s) > maxWebhookReads {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", WebhookReadsAnnotation, len(s), maxWebhookReads)
	}
	var rs map[string]WebhookReplica
	if err := json.Unmarshal([]byte(s), &rs); err != nil {
		return nil, fmt.Errorf("%s: %w", WebhookReadsAnnotation, err)
	}
	if len(rs) > MaxWebhookReplicas {
		return nil, fmt.Errorf("%s: %d replicas, more than %d", WebhookReadsAnnotation, len(rs), MaxWebhookReplicas)
	}
	for name, r := range rs {
		if name == "" || len(name) > 253 {
			return nil, fmt.Errorf("%s: replica name %q: must be 1 to 253 bytes", WebhookReadsAnnotation, truncate(name, 16))
		}
		if r.Level == skew.Unannounced {
			return nil, fmt.Errorf("%s: replica %s: no level", WebhookReadsAnnotation, truncate(name, 64))
		}
		if err := (skew.Announcement{Release: r.Release, Level: r.Level}).Validate(); err != nil {
			return nil, fmt.Errorf("%s: replica %s: %w", WebhookReadsAnnotation, truncate(name, 64), err)
		}
	}
	return rs, nil
}

// SetWebhookReads writes entries rs into the reads Lease's annotations, in
// the format WebhookReadsFormat; with no entries it removes them.
func SetWebhookReads(annotations map[string]string, rs map[string]WebhookReplica) error {
	if len(rs) == 0 {
		delete(annotations, WebhookReadsAnnotation)
	} else {
		b, err := json.Marshal(rs)
		if err != nil {
			return fmt.Errorf("%s: %w", WebhookReadsAnnotation, err)
		}
		annotations[WebhookReadsAnnotation] = string(b)
	}
	annotations[LeaseFormatAnnotation] = FormatLevel(WebhookReadsFormat)
	return nil
}

// WebhookLevel is the highest format level every webhook replica reads:
// the lowest any entry says, or skew.Oldest when there are none (a webhook
// of a release before entries existed, or none installed).
func WebhookLevel(rs map[string]WebhookReplica) skew.Level {
	if len(rs) == 0 {
		return skew.Oldest()
	}
	l := skew.Level(^uint16(0))
	for _, r := range rs {
		l = min(l, r.Level)
	}
	return l
}
