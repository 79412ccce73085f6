package testcluster

import (
	"net/netip"
	"testing"
)

func TestIPAllocatorStaysInLoopbackAndSkipsEnds(t *testing.T) {
	a := newIPAllocator()
	seen := map[netip.Addr]bool{}
	for i := range 600 { // crosses two /24 boundaries
		ip, err := a.allocate()
		if err != nil {
			t.Fatalf("allocate #%d: %v", i, err)
		}
		b := ip.As4()
		switch {
		case !ip.IsLoopback():
			t.Fatalf("allocate #%d = %v, not loopback", i, ip)
		case b[1] == 0:
			t.Fatalf("allocate #%d = %v, inside 127.0.0.0/16 next to 127.0.0.1", i, ip)
		case b[3] == 0 || b[3] == 255:
			t.Fatalf("allocate #%d = %v, a .0 or .255 address", i, ip)
		case seen[ip]:
			t.Fatalf("allocate #%d = %v, handed out twice", i, ip)
		}
		seen[ip] = true
	}
	if first := netip.MustParseAddr("0.0.0.0"); a.prefix().Contains(first) {
		t.Fatalf("prefix %v is not the loopback block", a.prefix())
	}
}

func TestPodCIDR(t *testing.T) {
	tests := []struct {
		index int
		want  string
	}{
		{0, "10.64.0.0/24"},
		{1, "10.64.1.0/24"},
		{256, "10.65.0.0/24"},
		{1<<14 - 1, "10.127.255.0/24"},
	}
	for _, tt := range tests {
		got, err := podCIDR(tt.index)
		if err != nil || got.String() != tt.want {
			t.Errorf("podCIDR(%d) = %v, %v; want %s", tt.index, got, err, tt.want)
		}
		if got.Addr().IsLoopback() {
			t.Errorf("podCIDR(%d) = %v is loopback; EndpointSlice validation rejects that", tt.index, got)
		}
	}
	if _, err := podCIDR(1 << 14); err == nil {
		t.Errorf("podCIDR(1<<14) succeeded, want an error: it would leave 10.64.0.0/10")
	}
}

func TestFreePortsAreDistinct(t *testing.T) {
	ports, err := freePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("freePorts(4) = %v", ports)
		}
		seen[p] = true
	}
}
