package suite

import (
	"strings"
	"testing"
)

// TestWriteSigningScalesWithTheZone: the estimate grows with the zone and
// charges the leader two verifications per report.
func TestWriteSigningScalesWithTheZone(t *testing.T) {
	rep := &Report{Signing: SigningCost{SignNs: 20e3, VerifyNs: 50e3}}
	for _, n := range []int{3, 129} {
		rep.Sizes = append(rep.Sizes, SizeResult{N: n})
	}
	var b strings.Builder
	writeSigning(&b, rep)
	out := b.String()
	// 129 members every 2 s: 64.5 reports/s × 2 × 50 µs + 20 µs / 2 s = 0.65 % of a core.
	for _, want := range []string{"| 129 | 64.5 | 0.65 %", "| 3 | 1.5 | 0.02 %"} {
		if !strings.Contains(out, want) {
			t.Errorf("signing table lacks %q:\n%s", want, out)
		}
	}
	if got := measureSigning(); got.VerifyNs <= 0 || got.SignFullNs <= got.SignNs/2 {
		t.Errorf("measureSigning = %+v", got)
	}
}

// TestPrintSigningCost logs the measured cost; -run it to see the figures.
func TestPrintSigningCost(t *testing.T) {
	if testing.Short() {
		t.Skip("measures")
	}
	rep := &Report{Signing: measureSigning()}
	for _, n := range []int{3, 5, 9, 17, 33, 65, 129} {
		rep.Sizes = append(rep.Sizes, SizeResult{N: n})
	}
	var b strings.Builder
	writeSigning(&b, rep)
	t.Log("\n" + b.String())
}
