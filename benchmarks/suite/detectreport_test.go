package suite

import (
	"strings"
	"testing"
)

func TestDetectMarkdown(t *testing.T) {
	rep := deathsReport()
	rep.Config = DetectConfig()
	rep.Config.DetectKills = 2
	rep.Sizes[0].Ours.Stalls = []Stall{{Node: "n5-2", Seconds: 1.2}, {Node: "n5-3", Seconds: 2.9}}
	rep.Sizes[0].Ours.StallFalse = []string{"n5-3 at +4.1s"}
	var b strings.Builder
	if err := WriteDetectMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"detection run (`make bench-detect`)",
		"2 reset and 2 silent deaths per system and size",
		// The rule's floor at N=5: 5.6 s for a reset, 3.3 s for a silent death.
		"| 5 | reset | 5.1 / 5.8 (max of n=2) | 5.2 / 5.9 (max of n=2) | 5.6 s | ✅ 1.05× | 2.1 / 2.4 (max of n=2) | (2.46×) | ✅ 5.9 s |",
		"| 5 | silent | 6.3 / 8.4 (max of n=2) | 6.4 / 8.5 (max of n=2) | 3.3 s | ❌ 2.57× | 3.3 / 3.3 (max of n=1) | ❌ 2.58× | ❌ 8.5 s |",
		"| 9 | silent | — | — | 3.0 s | — | — | — | — |",
		// What silence costs, p50 against p50.
		"| 5 | +1.2 | +1.2 | +1.2 |",
		"| 9 | — | — | — |",
		"| 5 | silent | 3.0 / 3.0 (max of n=2) | 1.5 / 1.5 (max of n=1) |",
		"A **silent** death",
		"| 5 | 2 | 1.2 / 2.9 | ❌ 1: n5-3 at +4.1s |",
		"| 9 | 0 | — | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("detect.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "⏱×a/×b") {
		t.Errorf("detect.md explains time dilation for a run without any:\n%s", md)
	}
}
