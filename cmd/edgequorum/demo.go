package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/edgequorum/edgequorum/internal/demo"
)

func init() {
	register(command{name: "demo", summary: "play the edgequorum story on a local real control plane", run: runDemo})
}

const demoUsage = `Starts a local control plane (etcd, kube-apiserver, kube-controller-manager
from bin/, see 'make controlplane'), a zone of edge nodes with an agent each,
and the webhook; deploys a Service with a pod per node; cuts the zone from the
cloud (pods and endpoints are kept), then kills a node (it is judged dead and
evicted). A live table shows what Kubernetes sees. Ctrl-C stops everything.`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := demo.DefaultOptions()
	opts.Out = stdout
	fs := newFlagSet("demo", demoUsage, stderr)
	fs.IntVar(&opts.Nodes, "nodes", opts.Nodes, "edge nodes in the zone (at least 3)")
	fs.StringVar(&opts.Dir, "dir", "", "folder for the cluster's data and all logs (default: a new folder under the system temp dir)")
	fs.DurationVar(&opts.Grace, "grace", opts.Grace, "node-monitor-grace-period of the controller manager")
	fs.DurationVar(&opts.Toleration, "toleration", opts.Toleration, "the pods' tolerationSeconds for unreachable:NoExecute")
	fs.BoolVar(&opts.Hold, "hold", false, "keep everything running after the story until Ctrl-C")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if opts.Nodes < 3 {
		return usageErrorf("--nodes must be at least 3, got %d", opts.Nodes)
	}
	if opts.Grace < 10*time.Second || opts.Toleration < 5*time.Second {
		return usageErrorf("--grace must be at least 10s and --toleration at least 5s")
	}
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", "edgequorum-demo-")
		if err != nil {
			return err
		}
		opts.Dir = dir
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the edgequorum binary: %w", err)
	}
	opts.Binary = self
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return err
	}
	err = demo.Run(ctx, opts)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(stdout, "interrupted; everything is stopped. Logs:", opts.Dir)
		return nil
	}
	return err
}
