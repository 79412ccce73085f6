// Package testkeys builds zone keyrings for tests. It owns nothing else and
// must not be imported outside tests.
package testkeys

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/edgequorum/edgequorum/zonekeys"
)

// Ring returns a keyring of id, fill pairs in signing order: each key is its
// fill string repeated to 32 bytes, so that two rings share a key exactly when
// they name the same id with the same fill.
func Ring(t testing.TB, pairs ...string) *zonekeys.Ring {
	t.Helper()
	var lines []string
	for i := 0; i+1 < len(pairs); i += 2 {
		lines = append(lines, pairs[i]+":"+base64.StdEncoding.EncodeToString([]byte(strings.Repeat(pairs[i+1], 32))))
	}
	k, err := zonekeys.Parse(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
