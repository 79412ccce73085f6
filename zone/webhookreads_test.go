package zone

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/skew"
)

// readsOf is the reads Lease's annotations for rs, as a replica writes them.
func readsOf(t *testing.T, rs map[string]WebhookReplica) map[string]string {
	t.Helper()
	a := map[string]string{}
	if err := SetWebhookReads(a, rs); err != nil {
		t.Fatal(err)
	}
	return a
}

func TestWebhookReadsRoundTripAndLevel(t *testing.T) {
	at := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	a := readsOf(t, map[string]WebhookReplica{
		"edgequorum-webhook-7d9f-abcde": {Level: skew.Level1 + 1, Release: "v0.5.0", At: at},
		"edgequorum-webhook-6c8e-fghij": {Level: skew.Level1, Release: "v0.4.0", At: at.Add(-time.Minute)},
	})
	if a[LeaseFormatAnnotation] != FormatLevel(WebhookReadsFormat) {
		t.Errorf("written in format %q", a[LeaseFormatAnnotation])
	}
	got, err := ParseWebhookReads(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got["edgequorum-webhook-7d9f-abcde"].At.Equal(at) || got["edgequorum-webhook-6c8e-fghij"].Release != "v0.4.0" {
		t.Errorf("round trip: %+v", got)
	}
	if l := WebhookLevel(got); l != skew.Level1 {
		t.Errorf("WebhookLevel = %v, want the lowest replica's, level 1", l)
	}
	// No entries: a webhook of a release before them, or none at all.
	for _, empty := range []map[string]string{nil, {WebhookReadsAnnotation: "{}"}, readsOf(t, nil)} {
		rs, err := ParseWebhookReads(empty)
		if err != nil || WebhookLevel(rs) != skew.Oldest() {
			t.Errorf("%v: level %v, %v; want the oldest this build reads", empty, WebhookLevel(rs), err)
		}
	}
	if _, ok := readsOf(t, nil)[WebhookReadsAnnotation]; ok {
		t.Error("no entries written as an annotation")
	}
}

func TestParseWebhookReadsRefusesWhatItCannotTrust(t *testing.T) {
	many := map[string]WebhookReplica{}
	for i := range MaxWebhookReplicas + 1 {
		many[strings.Repeat("r", i+1)] = WebhookReplica{Level: skew.Level1, Release: "v1"}
	}
	tooMany := readsOf(t, many)[WebhookReadsAnnotation]
	for _, tt := range []struct{ name, in, want string }{
		{"not JSON", "{", "edgequorum.io/reads"},
		{"no level", `{"a":{"level":0,"release":"v1"}}`, "no level"},
		{"a release that is no version", `{"a":{"level":1,"release":"v1\u001b[2J"}}`, "bad release"},
		{"an empty name", `{"":{"level":1,"release":"v1"}}`, "replica name"},
		{"too many replicas", tooMany, "replicas, more than"},
		{"too long", `{"a":{"level":1,"release":"` + strings.Repeat("x", maxWebhookReads) + `"}}`, "bytes, more than"},
	} {
		if _, err := ParseWebhookReads(map[string]string{WebhookReadsAnnotation: tt.in}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
	// A newer release's format: refused as such, with what to do.
	newer := readsOf(t, map[string]WebhookReplica{"a": {Level: skew.Level1, Release: "v1"}})
	newer[LeaseFormatAnnotation] = FormatLevel(skew.Current() + 1)
	if _, err := ParseWebhookReads(newer); !errors.Is(err, skew.ErrTooNew) || !strings.Contains(err.Error(), skew.UpgradeMember) {
		t.Errorf("a newer format: %v, want skew.ErrTooNew advising to upgrade this member", err)
	}
}

// FuzzParseWebhookReads: whatever the Lease holds, parsing neither panics nor
// takes an entry a writer could not have written.
func FuzzParseWebhookReads(f *testing.F) {
	f.Add(`{"w-1":{"level":1,"release":"v0.4.0","at":"2026-11-27T00:00:00Z"}}`, "1")
	f.Add(`{}`, "")
	f.Add(`{"a":{"level":65535,"release":""}}`, "99999")
	f.Fuzz(func(t *testing.T, s, format string) {
		rs, err := ParseWebhookReads(map[string]string{WebhookReadsAnnotation: s, LeaseFormatAnnotation: format})
		if err != nil {
			return
		}
		for name, r := range rs {
			if name == "" || r.Level == skew.Unannounced || (skew.Announcement{Release: r.Release, Level: r.Level}).Validate() != nil {
				t.Fatalf("took entry %q: %+v", name, r)
			}
		}
		if err := SetWebhookReads(map[string]string{}, rs); err != nil {
			t.Fatal(err)
		}
	})
}
