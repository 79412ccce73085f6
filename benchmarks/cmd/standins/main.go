// Command standins runs many zone members in one process for the benchmark
// suite's real-time leader phase (see benchmarks/internal/standin): the
// members a two-core machine cannot run as agents in real time, speaking
// the real protocol so the real agents see a full zone.
//
//	standins --config standins.json --status-address 127.0.0.1:9600
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/edgequorum/edgequorum/benchmarks/internal/standin"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "standins: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		config     = flag.String("config", "", "JSON file with the zone, key file and members to stand in for (written by bin/bench)")
		statusAddr = flag.String("status-address", "127.0.0.1:9600", "host:port serving /metrics, every series labelled standin=<node>")
		logLevel   = flag.String("log-level", "warn", "debug, info, warn or error")
		procs      = flag.Int("procs", 8, "GOMAXPROCS: the threads the stand-ins may run on")
	)
	flag.Parse()
	// A hundred members would each have a machine. On a busy host one
	// process gets CPU in proportion to its runnable threads, so at the
	// default of one per core the stand-ins together would get the share of
	// a single agent, answer handshakes late and look like a broken zone.
	if *procs < 1 {
		return fmt.Errorf("--procs must be at least 1, got %d", *procs)
	}
	runtime.GOMAXPROCS(*procs)
	if *config == "" {
		return fmt.Errorf("--config is required")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	b, err := os.ReadFile(*config)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var cfg standin.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("--config %s: %w", *config, err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "standins: "+format+"\n", args...) }
	return standin.Run(ctx, cfg, *statusAddr, log, progress)
}
