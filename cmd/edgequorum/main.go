// Command edgequorum is the single binary of edgequorum: the zone agent, the cloud
// admission webhook and the operator tools are subcommands of it. It only wires
// packages together; behaviour lives in the packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/edgequorum/edgequorum/internal/buildinfo"
)

// command is one subcommand. run receives the arguments after the subcommand name
// and returns errUsage (or a *usageError) for bad invocations so main can exit 2.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

// usageError marks an error the user made on the command line; main prints it and
// exits 2, like the flag package does for bad flags.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return &usageError{fmt.Errorf(format, a...)}
}

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
	err := c.run(ctx, args[1:], stdout, stderr)
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue), errors.Is(err, errFlagParse):
		if ue != nil {
			fmt.Fprintf(stderr, "edgequorum %s: %v\n", c.name, err)
		}
		return 2
	default:
		fmt.Fprintf(stderr, "edgequorum %s: %v\n", c.name, err)
		return 1
	}
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

// errFlagParse is returned when the flag package already printed the problem.
var errFlagParse = errors.New("bad flags")

// newFlagSet returns a FlagSet that reports errors instead of exiting, so run can
// map them to exit code 2 in one place.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("edgequorum "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: edgequorum %s [flags]\n\n%s\n\nFlags:\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and rejects stray positional arguments, which are almost
// always a mistyped flag.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errFlagParse
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	return nil
}
