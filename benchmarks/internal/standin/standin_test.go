package standin

import (
	"strings"
	"testing"
)

func TestValidateNamesEveryBadField(t *testing.T) {
	cfg := Config{PeerPort: 70000, StartRate: 0, Members: []Member{{Name: "n1", IP: "not-an-ip"}}}
	err := cfg.Validate()
	for _, want := range []string{"zone is required", "keyFile is required", "peerPort 70000", `members[0] ("n1")`, "startRate must be above 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	good := Config{Zone: "z", KeyFile: "k", PeerPort: 9470, StartRate: 8,
		Members: []Member{{Name: "n1", IP: "127.0.0.2", DataDir: "/d", Kubeconfig: "/k"}}}
	if err := good.Validate(); err != nil {
		t.Errorf("a good config: %v", err)
	}
}
