// Command edgehealth runs the benchmark suite's model of SuperEdge's
// edge-health daemon (see package baseline) on one node.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgequorum/edgequorum/benchmarks/baseline"
)

func main() {
	cfg := baseline.DefaultConfig()
	fs := flag.NewFlagSet("edgehealth", flag.ContinueOnError)
	fs.StringVar(&cfg.NodeName, "node-name", "", "this node's name (required)")
	fs.StringVar(&cfg.LocalIP, "local-ip", "", "this node's InternalIP: its identity and the exchange bind address (required)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig path (default: in-cluster)")
	fs.StringVar(&cfg.MetricsAddress, "metrics-address", "", "host:port serving /metrics (not counted as exchange traffic)")
	fs.DurationVar(&cfg.CheckPeriod, "check-period", cfg.CheckPeriod, "node list refresh and check period (SuperEdge healthcheckperiod)")
	fs.Float64Var(&cfg.ScoreLine, "score-line", cfg.ScoreLine, "summed plugin score a node needs to be normal")
	fs.IntVar(&cfg.Ping.Port, "ping-port", cfg.Ping.Port, "port the ping plugin connects to")
	fs.DurationVar(&cfg.Ping.Timeout, "ping-timeout", cfg.Ping.Timeout, "ping plugin connect timeout")
	fs.IntVar(&cfg.Ping.Tries, "ping-tries", cfg.Ping.Tries, "ping plugin tries per check (SuperEdge retrytime)")
	fs.Float64Var(&cfg.Ping.Weight, "ping-weight", cfg.Ping.Weight, "ping plugin weight")
	fs.DurationVar(&cfg.CommunPeriod, "commun-period", cfg.CommunPeriod, "exchange period (SuperEdge communicateperiod)")
	fs.DurationVar(&cfg.CommunTimeout, "commun-timeout", cfg.CommunTimeout, "exchange request timeout")
	fs.IntVar(&cfg.CommunTries, "commun-tries", cfg.CommunTries, "exchange tries per peer (SuperEdge communicateretrytime)")
	fs.IntVar(&cfg.CommunPort, "commun-port", cfg.CommunPort, "exchange server port")
	fs.DurationVar(&cfg.VotePeriod, "vote-period", cfg.VotePeriod, "vote period")
	fs.DurationVar(&cfg.VoteTimeout, "vote-timeout", cfg.VoteTimeout, "age after which a vote no longer counts")
	qps := fs.Float64("kube-api-qps", float64(cfg.QPS), "Kubernetes client QPS")
	fs.IntVar(&cfg.Burst, "kube-api-burst", cfg.Burst, "Kubernetes client burst")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	cfg.QPS = float32(*qps)
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(os.Stderr, "--log-level: %v\n", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := baseline.Run(ctx, cfg, log); err != nil {
		fmt.Fprintf(os.Stderr, "edgehealth: %v\n", err)
		os.Exit(1)
	}
}
