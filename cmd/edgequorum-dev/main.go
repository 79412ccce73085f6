// Command edgequorum-dev holds what runs on a developer's machine and never in a
// cluster: `edgequorum-dev demo` starts a local control plane and a zone of
// agents. It lives apart from the edgequorum binary so that the shipped image
// carries no test control plane, no fake kubelets and no demo script.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/internal/demo"
)

const usage = `Usage: edgequorum-dev demo [flags]

Starts a local control plane (etcd, kube-apiserver, kube-controller-manager
from bin/, see 'make controlplane'), a zone of edge nodes with an agent each
(the edgequorum binary next to this one), and the webhook; deploys a Service
with a pod per node; cuts the zone from the cloud (pods and endpoints are
kept), then kills a node (it is judged dead and evicted). A live table shows
what Kubernetes sees. Ctrl-C stops everything.

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run returns the exit code: 0 on success, 1 on a failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "demo" {
		if len(args) > 0 && (args[0] == "--version" || args[0] == "version") {
			fmt.Fprintln(stdout, buildinfo.String())
			return 0
		}
		fmt.Fprint(stderr, usage)
		return 2
	}
	err := runDemo(ctx, args[1:], stdout, stderr)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		if ue.msg != "" {
			fmt.Fprintln(stderr, "edgequorum-dev demo:", ue.msg)
		}
		return 2
	default:
		fmt.Fprintln(stderr, "edgequorum-dev demo:", err)
		return 1
	}
}

// usageError is a mistake on the command line; msg is empty when the flag
// package already printed it.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := demo.DefaultOptions()
	opts.Out = stdout
	fs := flag.NewFlagSet("edgequorum-dev demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.IntVar(&opts.Nodes, "nodes", opts.Nodes, "edge nodes in the zone (at least 3)")
	fs.StringVar(&opts.Dir, "dir", "", "folder for the cluster's data and all logs (default: a new folder under the system temp dir)")
	fs.DurationVar(&opts.Grace, "grace", opts.Grace, "node-monitor-grace-period of the controller manager")
	fs.DurationVar(&opts.Toleration, "toleration", opts.Toleration, "the pods' tolerationSeconds for unreachable:NoExecute")
	fs.BoolVar(&opts.Hold, "hold", false, "keep everything running after the story until Ctrl-C")
	fs.StringVar(&opts.Binary, "edgequorum", "", "the edgequorum binary the agents and the webhook run (default: edgequorum next to this binary)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q (flags start with --)", fs.Arg(0))}
	}
	if opts.Nodes < 3 {
		return usageError{fmt.Sprintf("--nodes must be at least 3, got %d", opts.Nodes)}
	}
	if opts.Grace < 10*time.Second || opts.Toleration < 5*time.Second {
		return usageError{"--grace must be at least 10s and --toleration at least 5s"}
	}
	if opts.Binary == "" {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this binary to look for edgequorum beside it: %w", err)
		}
		opts.Binary = filepath.Join(filepath.Dir(self), "edgequorum")
	}
	if _, err := os.Stat(opts.Binary); err != nil {
		return usageError{fmt.Sprintf("--edgequorum: %v (build it with 'make build')", err)}
	}
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", "edgequorum-demo-")
		if err != nil {
			return err
		}
		opts.Dir = dir
	}
	var err error
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
