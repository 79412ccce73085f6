// Command edgequorum is the single binary of edgequorum: the zone agent, the cloud
// admission webhook and the operator tools are subcommands of it. It only wires
// packages together; behaviour lives in the packages.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/internal/cli"
)

// command is one subcommand. run receives the arguments after the subcommand name
// and returns a *cli.UsageError (or cli.ErrFlagParse) for bad invocations so main can exit 2.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run returns the process exit code: 0 on success, 1 on a runtime failure, 2 on a
// usage error (unknown subcommand, bad flag, missing argument).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		printUsage(stdout)
		return 0
	case "--version", "-version":
		fmt.Fprintln(stdout, buildinfo.String())
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "edgequorum: unknown subcommand %q\n\n", args[0])
		printUsage(stderr)
		return 2
	}
	return cli.Exit(c.name, c.run(ctx, args[1:], stdout, stderr), stderr)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "edgequorum: quorum-backed node health for edge Kubernetes zones")
	fmt.Fprintln(w, "\nUsage:\n  edgequorum <subcommand> [flags]\n\nSubcommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'edgequorum <subcommand> --help' for its flags.")
}
