package agent

import "runtime"

// applyMemProfiling turns the Go runtime's allocation sampling off unless the
// agent serves its heap profile (--profiling). Every Go program samples one
// allocation per 512 KiB by default, walking its stack and recording it in a
// profile hash table of about 1.4 MiB: in an agent nobody profiles, that is
// work and pages touched for nothing (a three-member leader's working set
// read 0.15 MiB less in one measurement, within its spread;
// benchmarks/results/issue40). Once off it stays off, as the runtime asks:
// a rate changed back mid-run skews the profile.
func applyMemProfiling(profiling bool) {
	if !profiling {
		runtime.MemProfileRate = 0
	}
}
