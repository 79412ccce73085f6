package zoneport

import (
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/testkeys"
)

// TestNewNamesWhatIsMissing: a port built without what it needs says which
// fields are missing, rather than a list of everything it could need.
func TestNewNamesWhatIsMissing(t *testing.T) {
	_, err := New(Config{Node: "n1", Advertise: "127.0.0.1:9470", HandshakeTimeout: time.Second}, nil)
	if err == nil {
		t.Fatal("a port without a server ID, keys or key source was built")
	}
	for _, want := range []string{"DataDir (or NodeKey)", "ServerID", "Keys"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	for _, set := range []string{"Node,", "Advertise"} {
		if strings.Contains(err.Error(), set) {
			t.Errorf("error %q names %s, which is set", err, set)
		}
	}
	_, err = New(Config{DataDir: t.TempDir(), Node: "n1", ServerID: "s", Advertise: "127.0.0.1:9470",
		Keys: testkeys.Ring(t, "k1", "a")}, nil)
	if err == nil || !strings.Contains(err.Error(), "handshake timeout") {
		t.Errorf("zero handshake timeout: %v", err)
	}
}
