package agent

import (
	"log/slog"
	"os"
	"runtime"
)

// applyMaxProcs sets how many goroutines run at once: GOMAXPROCS when set
// (the runtime took it at start, and an operator's environment wins, as for
// any Go program), else n, else (0) the runtime's own default, which follows
// the container's CPU limit.
func applyMaxProcs(n int, log *slog.Logger) {
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		log.Info("parallelism", "source", "GOMAXPROCS", "value", v)
		return
	}
	if n == 0 {
		log.Info("parallelism", "source", "Go runtime", "procs", runtime.GOMAXPROCS(0))
		return
	}
	runtime.GOMAXPROCS(n)
	log.Info("parallelism", "source", "--max-procs", "procs", n)
}
