package fleet

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Config is one `make bench-fleet` run. Flag names are given in brackets.
type Config struct {
	// Sites are the fleet sizes to measure, each on a fresh control plane
	// [-sites].
	Sites []int
	// NodesPerSite is every site's node count [-nodes-per-site].
	NodesPerSite int
	// PodsPerNode is how many pods each node runs [-pods-per-node].
	PodsPerNode int
	// NodeBytes is the size a Node object is padded to with container images,
	// as a real kubelet reports them [-node-bytes].
	NodeBytes int
	// RequestBudget is the rate of requests the simulated fleet may make of
	// the apiserver per second of this machine's time; the time dilation of
	// a size is what brings the fleet's real rate down to it [-request-budget].
	RequestBudget float64
	// Dilation, when above zero, is every size's time dilation instead
	// [-dilation].
	Dilation float64
	// Windows is how many quiet zone Lease periods the steady state is
	// measured over [-windows].
	Windows int
	// OutageAt is the fleet size whose steady state the regional outage
	// follows, 0 for none [-outage-at]: at the larger sizes' dilation it
	// would take hours.
	OutageAt int
	// BinDir holds the control plane and edgequorum binaries [-bin].
	BinDir string
	// WorkDir receives each size's cluster, logs and audit log [-work].
	WorkDir string
	// Out is where the results are written [-out].
	Out string
	// Progress receives a line per step.
	Progress func(format string, args ...any)
}

// The cadences of the fleet, in undilated time: the kubelet's defaults and
// the agent's (apiwriter.DefaultConfig).
const (
	kubeletLeaseRenew  = 10 * time.Second
	kubeletStatusEvery = 5 * time.Minute
	nodeGrace          = 50 * time.Second
)

// DefaultConfig is what `make bench-fleet` runs.
func DefaultConfig() Config {
	return Config{
		Sites:         []int{300, 1000, 3000},
		NodesPerSite:  3,
		PodsPerNode:   1,
		NodeBytes:     15_000,
		RequestBudget: 400,
		Windows:       1,
		OutageAt:      300,
		BinDir:        "bin",
		WorkDir:       "/tmp/edgequorum-fleet",
		Out:           "benchmarks/results",
	}
}

// Validate names the flag of every problem.
func (c Config) Validate() error {
	var errs []error
	if len(c.Sites) == 0 {
		errs = append(errs, errors.New("-sites lists no fleet size"))
	}
	for _, s := range c.Sites {
		if s < 1 {
			errs = append(errs, fmt.Errorf("-sites: %d is no fleet size (want at least 1)", s))
		}
	}
	if c.NodesPerSite < 1 || c.NodesPerSite > 9 {
		errs = append(errs, fmt.Errorf("-nodes-per-site %d: want 1 to 9 (small sites)", c.NodesPerSite))
	}
	if c.PodsPerNode < 0 {
		errs = append(errs, fmt.Errorf("-pods-per-node %d: want 0 or more", c.PodsPerNode))
	}
	if c.NodeBytes < 1000 || c.NodeBytes > 200_000 {
		errs = append(errs, fmt.Errorf("-node-bytes %d: want 1000 to 200000", c.NodeBytes))
	}
	if c.RequestBudget <= 0 && c.Dilation <= 0 {
		errs = append(errs, fmt.Errorf("-request-budget %g: want above 0 (or a -dilation)", c.RequestBudget))
	}
	if c.Dilation < 0 {
		errs = append(errs, fmt.Errorf("-dilation %g: want 0 (from -request-budget) or at least 1", c.Dilation))
	} else if c.Dilation > 0 && c.Dilation < 1 {
		errs = append(errs, fmt.Errorf("-dilation %g: time can only be slowed down (want at least 1)", c.Dilation))
	}
	if c.OutageAt != 0 && !slices.Contains(c.Sites, c.OutageAt) {
		errs = append(errs, fmt.Errorf("-outage-at %d is none of the -sites %v", c.OutageAt, c.Sites))
	}
	if c.Windows < 1 {
		errs = append(errs, fmt.Errorf("-windows %d: want at least 1", c.Windows))
	}
	if c.BinDir == "" {
		errs = append(errs, errors.New("-bin is required"))
	}
	if c.WorkDir == "" {
		errs = append(errs, errors.New("-work is required"))
	}
	if c.Out == "" {
		errs = append(errs, errors.New("-out is required"))
	}
	return errors.Join(errs...)
}

// steadyRate is how many requests a second a fleet of sites makes in steady
// state, undilated, by the cadences above: the kubelets' Leases and status,
// every member's reachability check, the leaders' busy renewals (an upper
// bound: quiet ones are eight times fewer).
func (c Config) steadyRate(sites int) float64 {
	nodes := float64(sites * c.NodesPerSite)
	return nodes/kubeletLeaseRenew.Seconds() + nodes/kubeletStatusEvery.Seconds() +
		nodes/2 + float64(sites)/5
}

// dilation is the time dilation for a fleet of sites: as given, or what
// brings its steady rate within the request budget, never below 1.
func (c Config) dilation(sites int) float64 {
	if c.Dilation > 0 {
		return c.Dilation
	}
	return max(1, c.steadyRate(sites)/c.RequestBudget)
}
