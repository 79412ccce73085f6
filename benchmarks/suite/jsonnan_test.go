package suite

import (
	"encoding/json"
	"math"
	"testing"
)

func TestSteadyJSONKeepsNaN(t *testing.T) {
	in := Steady{Seconds: 60, Members: 5, Leader: "n-1", NodeSent: 12.5, LeaderCPU: math.NaN(), CommitP99: math.Inf(1)}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Steady
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Seconds != 60 || out.Members != 5 || out.Leader != "n-1" || out.NodeSent != 12.5 {
		t.Errorf("round trip lost values: %+v", out)
	}
	if !math.IsNaN(out.LeaderCPU) || !math.IsNaN(out.CommitP99) {
		t.Errorf("unmeasured figures did not come back as NaN: %+v", out)
	}
}

// TestLiveJSONKeepsNaN: a real-time run whose stand-ins could not be read at
// the end of the window still saves its leader's figures.
func TestLiveJSONKeepsNaN(t *testing.T) {
	in := Live{Leader: "l129-1", Servers: 7, LeaderCPU: 8.3, LeaderRSS: 112 << 20, RolesHeld: true,
		StandInSent: math.NaN(), StandInRecv: math.NaN(), StandInCPU: math.NaN(), StandInRSS: math.NaN()}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Live
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Leader != in.Leader || out.Servers != 7 || out.LeaderCPU != 8.3 || out.LeaderRSS != in.LeaderRSS || !out.RolesHeld {
		t.Errorf("round trip lost values: %+v", out)
	}
	if !math.IsNaN(out.StandInSent) || !math.IsNaN(out.StandInRSS) {
		t.Errorf("unmeasured figures did not come back as NaN: %+v", out)
	}
}
