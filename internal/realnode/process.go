package realnode

import (
	"fmt"
	"time"

	"github.com/edgequorum/edgequorum/internal/proc"
)

// liveProcesses lists the non-zombie processes visible in /proc. Inside the
// node's PID namespace that is only the test binary's own tree, so Stop can
// find what containerd forked outside its process group (the shims).
func liveProcesses() []proc.Stat {
	ps, err := proc.Processes()
	if err != nil {
		return nil
	}
	live := ps[:0]
	for _, p := range ps {
		if !p.Zombie {
			live = append(live, p)
		}
	}
	return live
}

// waitGone polls alive until it returns nothing. Zombies count as gone: they
// run nothing and hold nothing, and the namespace's init reaps them.
func waitGone(timeout time.Duration, alive func() []int) error {
	deadline := time.Now().Add(timeout)
	for {
		left := alive()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still alive after %v", left, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
