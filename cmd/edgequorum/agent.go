package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/edgequorum/edgequorum/internal/agentcmd"
)

func init() {
	register(command{name: "agent", summary: "run the zone agent on an edge node (DaemonSet)", run: runAgent})
}

// narrowAgent is the file name of the agent-only binary (cmd/edgequorum-agent)
// that the image and `make build` put beside edgequorum.
const narrowAgent = "edgequorum-agent"

// runAgent hands the agent over to the narrow binary beside this one, by
// exec, so that the process keeps its PID, arguments and environment but
// maps only what the agent links; the webhook, the operator tools and the
// clientset of every API group stay out of an edge node's memory. Without
// that binary (a `go install` of this command alone), or when exec fails,
// the agent runs here, the same agent with more resident pages, and says so.
func runAgent(ctx context.Context, args []string, _, stderr io.Writer) error {
	if exe, err := os.Executable(); err == nil {
		if path, ok := besideExecutable(exe); ok {
			err := syscall.Exec(path, append([]string{path}, args...), os.Environ())
			fmt.Fprintf(stderr, "edgequorum agent: exec %s failed (%v); running the agent in this binary, which keeps more of itself in memory\n", path, err)
		}
	}
	return agentcmd.Run(ctx, args, stderr)
}

// besideExecutable returns the narrow agent in exe's directory, if it is
// there as an executable regular file.
func besideExecutable(exe string) (string, bool) {
	path := filepath.Join(filepath.Dir(exe), narrowAgent)
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", false
	}
	return path, true
}
