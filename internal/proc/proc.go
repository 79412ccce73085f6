// Package proc runs the child processes that tests, benchmarks and the demo
// drive (agents, the webhook, baseline daemons): each in its own process group,
// killed by the kernel if its parent dies, with its output in a log file.
package proc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Process is one running child.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs binary with args in this process's environment, appending its
// stdout and stderr to logPath.
func Start(binary string, args []string, logPath string) (*Process, error) {
	return StartEnv(binary, args, nil, logPath)
}

// StartEnv is Start with the child's whole environment given (nil inherits
// this process's): a benchmark sets a runtime knob for the processes it
// measures, not for the others it starts.
func StartEnv(binary string, args, env []string, logPath string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "# %s %s\n", binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = env
	// Its own process group, so signals reach whatever it forks; SIGKILL
	// from the kernel if we die, so nothing outlives a crashed test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(binary), err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the child's process ID (and process group ID).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Running reports whether the child has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Done is closed when the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM to the child's group and SIGKILL after grace; it returns
// once the child is reaped.
func (p *Process) Stop(grace time.Duration) {
	syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill kills the child's group at once, like a node losing power, and waits
// until it is reaped.
func (p *Process) Kill() {
	syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
}
