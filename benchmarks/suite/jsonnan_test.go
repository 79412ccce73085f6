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
