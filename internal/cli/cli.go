// Package cli is the command-line plumbing edgequorum's two binaries share:
// flag sets that report errors instead of exiting, the exit-code rule (0
// done, 1 a runtime failure, 2 a usage error, as the flag package has it),
// the log and memory-limit flags, and the environment variable that names an
// agent's status address.
//
// It owns no subcommand's behaviour, and must not import the agent, the
// webhook or a Kubernetes clientset (internal/layering checks it): the narrow
// agent binary links it, and everything it links is resident on every edge
// node.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// UsageError marks an error the user made on the command line; Exit prints
// it and returns 2, like the flag package does for bad flags.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, a ...any) error {
	return &UsageError{fmt.Errorf(format, a...)}
}

// ErrFlagParse is returned when the flag package already printed the
// problem, so that Exit only sets the code.
var ErrFlagParse = errors.New("bad flags")

// NewFlagSet returns a FlagSet for `edgequorum <name>` that reports errors
// instead of exiting, so that Exit maps them to exit code 2 in one place.
func NewFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("edgequorum "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: edgequorum %s [flags]\n\n%s\n\nFlags:\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// ParseFlags parses args and rejects stray positional arguments, which are
// almost always a mistyped flag.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrFlagParse
	}
	if fs.NArg() > 0 {
		return Usagef("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	return nil
}

// Exit returns the process exit code for what subcommand name returned,
// printing the error to stderr when the flag package has not: 0 on success
// or --help, 2 on a usage error, 1 otherwise.
func Exit(name string, err error, stderr io.Writer) int {
	var ue *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue), errors.Is(err, ErrFlagParse):
		if ue != nil {
			fmt.Fprintf(stderr, "edgequorum %s: %v\n", name, err)
		}
		return 2
	default:
		fmt.Fprintf(stderr, "edgequorum %s: %v\n", name, err)
		return 1
	}
}

// StatusAddressEnv names the status server's address for both the agent and
// `edgequorum status`, so that status run inside the agent's container
// (kubectl exec) asks the address the agent really listens on: the
// DaemonSet sets it to $(HOST_IP):9471.
const StatusAddressEnv = "EDGEQUORUM_STATUS_ADDRESS"

// EnvOr is the value of the environment variable key, or def when it is
// unset or empty: a flag default an environment may override.
func EnvOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
