// Command pause is the pod sandbox ("infra") container of internal/realnode's
// node: it holds the pod's namespaces open until it is told to stop, and as the
// pod's PID 1 it reaps the orphans of the pod's other containers when they
// share its PID namespace. It replaces registry.k8s.io/pause, which the test
// node may not pull: no registry is reachable, and none may be contacted.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return
		case <-children:
			reap()
		}
	}
}

// reap collects every exited child without blocking; one SIGCHLD may stand for
// many exits.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
