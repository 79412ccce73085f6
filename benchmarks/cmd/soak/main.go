// Command soak runs many edgequorum zones side by side on one local control
// plane, each under its own link impairment (random loss, one-way loss,
// bursts of darkness, jitter), for one long window, and counts the false
// verdicts: the node-hours a false-verdict rate needs, in one hour of wall
// clock. `make bench-soak` runs it; it writes soak.md and soak.json into -out.
// It needs root and nft (it installs and removes its own nftables table), and
// for jitter iptables-legacy (its own chain and netfilter queues).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/suite"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// defaultZones is 24 node-hours at 5 % loss for N = 3 and for N = 5 in an
// hour's window, the one-hour soak at 1 % on a zone of 9, and one zone each of
// one-way loss and bursts within the darkness the rule tolerates, one zone of
// longer bursts to measure the price of that tolerance, and one of 200 ms
// jitter.
const defaultZones = "8x3:loss=5,5x5:loss=5,1x9:loss=1,1x5:oneway=20,1x5:burst=1s,1x3:burst=3s,1x5:jitter=200ms"

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		zones  = flag.String("zones", defaultZones, "zones and impairments: COUNTxN:KIND=VALUE,… with KIND loss=P (%), oneway=P (%), burst=D (longest darkness) or jitter=D (longest delay)")
		window = flag.Duration("window", time.Hour, "how long the impairments are on")
		settle = flag.Duration("settle", 30*time.Second, "how long the formed zones run clean before the impairments")
		out    = flag.String("out", "benchmarks/results/soak", "directory for soak.md and soak.json")
		binDir = flag.String("bin", "", "directory with edgequorum and the control-plane binaries (default: the repository's bin/)")
		work   = flag.String("work", "", "directory for the control plane's files and the agents' logs (default: a temporary one, removed at the end)")
		seed   = flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the burst timings")
		render = flag.String("render", "", "only re-render soak.md (and soak.json) into -out from this soak.json")
	)
	flag.Parse()
	if *render != "" {
		raw, err := os.ReadFile(*render)
		if err != nil {
			return fmt.Errorf("-render: %w", err)
		}
		var rep suite.SoakReport
		if err := json.Unmarshal(raw, &rep); err != nil {
			return fmt.Errorf("-render %s: %w", *render, err)
		}
		return write(&rep, *out)
	}
	specs, err := suite.ParseSoakSpecs(*zones)
	if err != nil {
		return fmt.Errorf("-zones: %w", err)
	}
	if *binDir == "" {
		if *binDir, err = testcluster.FindBinDir(); err != nil {
			return fmt.Errorf("-bin: %w", err)
		}
	}
	if *work == "" {
		dir, err := os.MkdirTemp("", "edgequorum-soak-")
		if err != nil {
			return err
		}
		*work = dir
		defer os.RemoveAll(dir)
	}
	data, err := suite.NewDataDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(data)
	cfg := suite.SoakConfig{Zones: specs, Window: *window, Settle: *settle, BinDir: *binDir, WorkDir: *work, DataDir: data,
		Progress: os.Stdout, Seed: *seed}
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The commit the binaries were built from, read before the hour-long run.
	built := suite.ThisCommit()
	fmt.Printf("edgequorum soak: %s for %s; logs in %s\n", *zones, *window, *work)
	rep, err := suite.RunSoak(ctx, cfg)
	if rep == nil {
		return err
	}
	rep.Commit = built
	if werr := write(rep, *out); werr != nil {
		return errors.Join(err, werr)
	}
	fmt.Printf("done in %s; results in %s\n", rep.Took.Round(time.Second), *out)
	return err
}

// write writes soak.md and soak.json.
func write(rep *suite.SoakReport, out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var md bytes.Buffer
	if err := suite.WriteSoakMarkdown(&md, rep); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode soak.json: %w", err)
	}
	for name, b := range map[string][]byte{"soak.md": md.Bytes(), "soak.json": raw} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
