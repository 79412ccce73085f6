package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/edgequorum/edgequorum/raftzone"
)

func init() {
	register(command{name: "keygen", summary: "generate a zone key line for the agents' key Secret", run: runKeygen})
}

const keygenUsage = `Prints a new zone key as one id:base64 line (32 random bytes). Put it in the
Secret every agent of the zone mounts as --key-file:

  edgequorum keygen --id k1 > zone.key
  kubectl -n edgequorum-system create secret generic edgequorum-zone-key --from-file=zone.key

To rotate, append the new line below the old one everywhere, then move it to
the top (it signs; every line verifies), then drop the old line.`

func runKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keygen", keygenUsage, stderr)
	id := fs.String("id", "k1", "key id (letters, digits, '-', '_', '.')")
	out := fs.String("out", "", "write to this file (mode 0600) instead of stdout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	line, err := raftzone.GenerateKeyLine(*id)
	if err != nil {
		return usageErrorf("--id: %v", err)
	}
	if *out == "" {
		_, err := fmt.Fprintln(stdout, line)
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return fmt.Errorf("--out: %w", err)
	}
	return f.Close()
}
