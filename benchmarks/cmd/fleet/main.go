// Command fleet is `make bench-fleet`: what thousands of small edgequorum
// sites cost one control plane (see benchmarks/fleet).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/fleet"
	"github.com/edgequorum/edgequorum/benchmarks/suite"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-fleet:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg := fleet.DefaultConfig()
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	sites := fs.String("sites", joinInts(cfg.Sites), "fleet sizes to measure, comma-separated, each on a fresh control plane")
	fs.IntVar(&cfg.NodesPerSite, "nodes-per-site", cfg.NodesPerSite, "nodes of every site")
	fs.IntVar(&cfg.PodsPerNode, "pods-per-node", cfg.PodsPerNode, "pods each node runs")
	fs.IntVar(&cfg.NodeBytes, "node-bytes", cfg.NodeBytes, "size of a Node object, padded with container images as a kubelet reports them")
	fs.Float64Var(&cfg.RequestBudget, "request-budget", cfg.RequestBudget, "requests per second of this machine's time the fleet may make; sets each size's time dilation")
	fs.Float64Var(&cfg.Dilation, "dilation", cfg.Dilation, "time dilation for every size (0: from -request-budget)")
	fs.IntVar(&cfg.Windows, "windows", cfg.Windows, "quiet zone Lease periods (40 s, dilated) the steady state is measured over")
	fs.IntVar(&cfg.OutageAt, "outage-at", cfg.OutageAt, "the fleet size whose steady state is followed by a regional outage (a tenth of the sites cut past their pods' toleration, then restored); 0 for none")
	fs.StringVar(&cfg.BinDir, "bin", cfg.BinDir, "directory of etcd, kube-apiserver, kube-controller-manager and edgequorum")
	fs.StringVar(&cfg.WorkDir, "work", cfg.WorkDir, "directory for each size's cluster, logs and audit log")
	fs.StringVar(&cfg.Out, "out", cfg.Out, "directory the results (fleet.md, fleet.json) are written to")
	render := fs.String("render", "", "re-render the results (tables and plot) from this fleet.json into -out instead of running")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *render != "" {
		return rerender(*render, cfg.Out)
	}
	cfg.Sites = nil
	for f := range strings.SplitSeq(*sites, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-sites: %q is not a number", f)
		}
		cfg.Sites = append(cfg.Sites, n)
	}
	start := time.Now()
	cfg.Progress = func(format string, args ...any) {
		fmt.Printf("%s %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, build := suite.ThisMachine(), suite.ThisCommit()
	rs, err := fleet.Run(ctx, cfg)
	if len(rs) > 0 {
		if werr := fleet.Write(cfg.Out, rs, m.String(), build, "", start); werr != nil {
			return werr
		}
		fmt.Printf("results in %s/fleet.md\n", cfg.Out)
	}
	return err
}

// rerender writes the outputs of a saved run again, as that run made them.
func rerender(path, out string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-render: %w", err)
	}
	var saved struct {
		Machine string         `json:"machine"`
		Commit  string         `json:"commit"`
		Note    string         `json:"note"`
		Date    time.Time      `json:"date"`
		Results []fleet.Result `json:"results"`
	}
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("-render %s: %w", path, err)
	}
	return fleet.Write(out, saved.Results, saved.Machine, saved.Commit, saved.Note, saved.Date)
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ",")
}
