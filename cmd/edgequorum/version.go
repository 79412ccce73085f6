package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

func init() {
	register(command{name: "version", summary: "print the build version", run: runVersion})
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "Prints the module version and Go version of this binary.", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	v, goV := "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		v, goV = bi.Main.Version, bi.GoVersion
	}
	fmt.Fprintf(stdout, "edgequorum %s (%s)\n", v, goV)
	return nil
}
