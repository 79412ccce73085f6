package main

import (
	"context"
	"fmt"
	"io"

	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/internal/cli"
)

func init() {
	register(command{name: "version", summary: "print the version, revision and Go version of this binary", run: runVersion})
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("version", "Prints the version, source revision and Go version this binary was built with\n(the same as 'edgequorum --version').", stderr)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, buildinfo.String())
	return nil
}
