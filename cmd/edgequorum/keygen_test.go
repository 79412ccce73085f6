package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/edgequorum/edgequorum/zonekeys"
)

func TestKeygenSecretIsWhatTheDaemonSetMounts(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"keygen", "--id", "site-a.1", "--secret"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var s corev1.Secret
	if err := yaml.UnmarshalStrict(out.Bytes(), &s); err != nil {
		t.Fatalf("not a Secret: %v\n%s", err, out.String())
	}
	if s.Kind != "Secret" || s.Name != "edgequorum-zone-key" || s.Namespace != "edgequorum-system" {
		t.Fatalf("Secret %s %s/%s, want Secret edgequorum-system/edgequorum-zone-key", s.Kind, s.Namespace, s.Name)
	}
	keys, err := zonekeys.Parse(strings.NewReader(s.StringData["zone.key"]))
	if err != nil {
		t.Fatalf("zone.key does not parse: %v", err)
	}
	if keys.SigningID() != "site-a.1" {
		t.Fatalf("signing key id %q, want site-a.1", keys.SigningID())
	}
}
