package zone

import (
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/skew"
)

func TestWebhookReadsRoundTripAndLevel(t *testing.T) {
	at := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	rs := map[string]WebhookReplica{
		"edgequorum-webhook-7d9f-abcde": {Level: skew.Level1 + 1, Release: "v0.5.0", At: at},
		"edgequorum-webhook-6c8e-fghij": {Level: skew.Level1, Release: "v0.4.0", At: at.Add(-time.Minute)},
	}
	raw, err := FormatWebhookReads(rs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseWebhookReads(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got["edgequorum-webhook-7d9f-abcde"].At.Equal(at) || got["edgequorum-webhook-6c8e-fghij"].Release != "v0.4.0" {
		t.Errorf("round trip: %+v", got)
	}
	if l := WebhookLevel(got); l != skew.Level1 {
		t.Errorf("WebhookLevel = %v, want the lowest replica's, level 1", l)
	}
	if names := WebhookReplicaNames(got); names[0] != "edgequorum-webhook-6c8e-fghij" {
		t.Errorf("names not in order: %v", names)
	}
	// No entries: a webhook of a release before them, or none at all.
	for _, empty := range []string{"", "{}"} {
		rs, err := ParseWebhookReads(empty)
		if err != nil || WebhookLevel(rs) != skew.Oldest() {
			t.Errorf("%q: level %v, %v; want the oldest this build reads", empty, WebhookLevel(rs), err)
		}
	}
	if raw, _ := FormatWebhookReads(nil); raw != "" {
		t.Errorf("no entries rendered as %q", raw)
	}
}

func TestParseWebhookReadsRefusesWhatItCannotTrust(t *testing.T) {
	many := map[string]WebhookReplica{}
	for i := range MaxWebhookReplicas + 1 {
		many[strings.Repeat("r", i+1)] = WebhookReplica{Level: skew.Level1, Release: "v1"}
	}
	tooMany, _ := FormatWebhookReads(many)
	for _, tt := range []struct{ name, in, want string }{
		{"not JSON", "{", "edgequorum.io/reads"},
		{"no level", `{"a":{"level":0,"release":"v1"}}`, "no level"},
		{"a release that is no version", `{"a":{"level":1,"release":"v1\u001b[2J"}}`, "bad release"},
		{"an empty name", `{"":{"level":1,"release":"v1"}}`, "replica name"},
		{"too many replicas", tooMany, "replicas, more than"},
		{"too long", `{"a":{"level":1,"release":"` + strings.Repeat("x", maxWebhookReads) + `"}}`, "bytes, more than"},
	} {
		if _, err := ParseWebhookReads(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}

// FuzzParseWebhookReads: whatever the Lease holds, parsing neither panics nor
// takes an entry a writer could not have written.
func FuzzParseWebhookReads(f *testing.F) {
	f.Add(`{"w-1":{"level":1,"release":"v0.4.0","at":"2026-11-27T00:00:00Z"}}`)
	f.Add(`{}`)
	f.Add(`{"a":{"level":65535,"release":""}}`)
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ParseWebhookReads(s)
		if err != nil {
			return
		}
		for name, r := range rs {
			if name == "" || r.Level == skew.Unannounced || (skew.Announcement{Release: r.Release, Level: r.Level}).Validate() != nil {
				t.Fatalf("took entry %q: %+v", name, r)
			}
		}
		if _, err := FormatWebhookReads(rs); err != nil {
			t.Fatal(err)
		}
	})
}
