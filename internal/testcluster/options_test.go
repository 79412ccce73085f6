package testcluster

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string // substring; empty means valid
	}{
		{name: "zero value", opts: Options{}},
		{name: "production grace", opts: Options{NodeMonitorGracePeriod: 50 * time.Second, LeaseRenewInterval: 10 * time.Second}},
		{name: "negative grace", opts: Options{NodeMonitorGracePeriod: -time.Second}, wantErr: "NodeMonitorGracePeriod"},
		{name: "lease too slow for grace", opts: Options{NodeMonitorGracePeriod: 10 * time.Second, LeaseRenewInterval: 6 * time.Second}, wantErr: "LeaseRenewInterval"},
		{name: "negative eviction rate", opts: Options{NodeEvictionRate: -1}, wantErr: "NodeEvictionRate"},
		{name: "negative toleration", opts: Options{DefaultUnreachableTolerationSeconds: -1}, wantErr: "DefaultUnreachableTolerationSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.opts.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.wantErr)
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.NodeMonitorGracePeriod != DefaultNodeMonitorGracePeriod {
		t.Errorf("NodeMonitorGracePeriod = %v, want %v", o.NodeMonitorGracePeriod, DefaultNodeMonitorGracePeriod)
	}
	if len(o.Controllers) != 1 || o.Controllers[0] != "*" {
		t.Errorf("Controllers = %v, want [*]", o.Controllers)
	}
	if o.CloudZone != DefaultCloudZone {
		t.Errorf("CloudZone = %q, want %q", o.CloudZone, DefaultCloudZone)
	}
}
