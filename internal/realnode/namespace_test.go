package realnode_test

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/edgequorum/edgequorum/internal/realnode"
)

// TestNamespace checks the isolation every real-node test relies on, without
// any binary: the node addresses exist only here, there is no route out, and
// writes to the host paths the node uses land in the overlay.
func TestNamespace(t *testing.T) {
	if !realnode.InNamespace() {
		realnode.Require(t) // skips or fails with the reason
	}
	if os.Getpid() == 1 {
		t.Errorf("the tests run as PID 1; the namespace's init should be their parent")
	}
	iface, err := net.InterfaceByName(realnode.NodeInterface)
	if err != nil {
		t.Fatalf("node interface: %v", err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range addrs {
		got = append(got, a.String())
	}
	for _, want := range []string{realnode.APIServerAddress.String(), realnode.NodeAddress.String()} {
		if !strings.Contains(strings.Join(got, " "), want+"/") {
			t.Errorf("%s has %v, want %s", realnode.NodeInterface, got, want)
		}
	}
	// No default route: a dial to an address outside the namespace's networks
	// fails at once with "network is unreachable", never reaching a wire.
	if c, err := net.Dial("udp", "192.0.2.1:9"); err == nil {
		c.Close()
		t.Errorf("dialling 192.0.2.1 (TEST-NET-1) worked: the namespace has a route out")
	}
	routes, err := os.ReadFile("/proc/net/route")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(routes), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "00000000" {
			t.Errorf("default route in the namespace: %s", line)
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"/var", "/run", "/etc"} {
		if !strings.Contains(string(mounts), " "+dir+" ") || !strings.Contains(string(mounts), "overlay") {
			t.Errorf("%s is not overlaid:\n%s", dir, mounts)
		}
	}
}
