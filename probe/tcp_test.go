package probe

import (
	"strconv"
	"testing"
	"time"
)

func TestTCPProber(t *testing.T) {
	open := acceptingListener(t)
	closed := closedPort(t)
	tests := []struct {
		name string
		spec string
		host string
		want Result
	}{
		{"listening port", "tcp:port=" + strconv.Itoa(open), "127.0.0.1", Success},
		{"kubelet alias with explicit port", "kubelet:port=" + strconv.Itoa(open), "127.0.0.1", Success},
		{"refused", "tcp:port=" + strconv.Itoa(closed), "127.0.0.1", Failure},
		{"no host is our problem, not the peer's", "tcp:port=" + strconv.Itoa(open), "", Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewProber(mustParse(t, tt.spec), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := probeWithin(t, p, tt.host, 5*time.Second)
			if got != tt.want {
				t.Fatalf("Probe = %v (%v), want %v", got, err, tt.want)
			}
			if (err == nil) != (got == Success) {
				t.Fatalf("Probe error %v does not match result %v", err, got)
			}
		})
	}
}

func TestKubeletDefaultPort(t *testing.T) {
	p, err := NewProber(Spec{Kind: KindKubelet}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*tcpProber).port; got != "10250" {
		t.Fatalf("kubelet probe port = %s, want 10250", got)
	}
}
