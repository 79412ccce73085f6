package raftzone

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseKeys(t *testing.T) {
	good := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	other := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("o", 40)))
	short := base64.StdEncoding.EncodeToString([]byte("too-short"))
	tests := []struct {
		name    string
		in      string
		wantIDs []string
		wantErr string
	}{
		{name: "one key", in: "k1:" + good + "\n", wantIDs: []string{"k1"}},
		{name: "rotation keeps order", in: "# new key signs\nk2:" + other + "\n\nk1:" + good, wantIDs: []string{"k2", "k1"}},
		{name: "empty", in: "", wantErr: "no keys"},
		{name: "only comments", in: "# nothing\n", wantErr: "no keys"},
		{name: "no colon", in: good, wantErr: "line 1: want id:base64"},
		{name: "bad base64", in: "k1:@@@", wantErr: "line 1: key \"k1\" is not valid base64"},
		{name: "short key", in: "k1:" + short, wantErr: "has 9 bytes, need at least 32"},
		{name: "duplicate id", in: "k1:" + good + "\nk1:" + other, wantErr: "appears twice"},
		{name: "bad id", in: "k 1:" + good, wantErr: "may hold only"},
		{name: "empty id", in: ":" + good, wantErr: "1 to 64 characters"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKeys(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(k.IDs(), ","); got != strings.Join(tc.wantIDs, ",") {
				t.Fatalf("ids %s, want %v", got, tc.wantIDs)
			}
			if k.SigningID() != tc.wantIDs[0] {
				t.Fatalf("signing id %s", k.SigningID())
			}
		})
	}
}

func TestLoadKeyFileNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if _, err := LoadKeyFile(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("k1:short\n"), 0o600)
	if _, err := LoadKeyFile(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad file: %v", err)
	}
	line, err := GenerateKeyLine("gen")
	if err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte(line+"\n"), 0o600)
	k, err := LoadKeyFile(ok)
	if err != nil {
		t.Fatal(err)
	}
	if id, key := k.SigningKey(); id != "gen" || len(key) != MinKeyBytes {
		t.Fatalf("generated key %s/%d bytes", id, len(key))
	}
	if _, err := GenerateKeyLine("bad id"); err == nil {
		t.Fatal("GenerateKeyLine accepted a bad id")
	}
}
