// Command edgequorum-agent is the zone agent alone: what `edgequorum agent`
// runs, in a binary that links nothing of the webhook, the operator tools or
// a clientset of every API group, so that less of it is resident on an edge
// node. The image carries it beside edgequorum, and `edgequorum agent` hands
// over to it; an operator never needs to call it by name. It only wires
// packages together (internal/agentcmd).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgequorum/edgequorum/internal/agentcmd"
	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/internal/cli"
)

func main() {
	args := os.Args[1:]
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Println(buildinfo.String())
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Exit("agent", agentcmd.Run(ctx, args, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}
