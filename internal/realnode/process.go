package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one node component (containerd, kubelet, kube-proxy,
// kube-scheduler) as a child process leading its own process group, with its
// output in a log file. Like testcluster's components it gets SIGKILL from the
// kernel when the test process dies (Pdeathsig); what it forks outside its
// group (containerd's shims) Node.Stop finds by other means.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once reaped; waitErr is set before
	waitErr error
}

func startProcess(name, path string, args, env []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "# %s %s\n", path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, SIGKILL after timeout, and returns
// once the leader is reaped and the group is gone. A process that had died
// before stop is reported: that is a crash the test should see.
func (p *process) stop(timeout time.Duration) error {
	var crashed error
	if exited, err := p.exited(); exited {
		crashed = fmt.Errorf("%s had exited before stop: %v; last lines of %s:\n%s", p.name, err, p.logPath, tailFile(p.logPath, 20))
	} else if err := syscall.Kill(-p.pid(), syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling %s: %w", p.name, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	if err := waitGone(timeout, func() []int { return groupMembers(p.pid()) }); err != nil {
		return errors.Join(crashed, fmt.Errorf("process group of %s: %w", p.name, err))
	}
	return crashed
}

// waitReady polls check until it succeeds, the process exits or ctx ends;
// failures carry the tail of the component's log.
func (p *process) waitReady(ctx context.Context, check func(context.Context) error) error {
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for {
		checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last := check(checkCtx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited while starting (%v); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, tailFile(p.logPath, 40))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %v); last lines of %s:\n%s", p.name, ctx.Err(), last, p.logPath, tailFile(p.logPath, 40))
		case <-ticker.C:
		}
	}
}

// procStat is what Node.Stop needs to know of a process from /proc.
type procStat struct {
	pid, pgrp int
	zombie    bool
}

// processes lists the processes visible in /proc. Inside the node's PID
// namespace that is only the test binary's own tree.
func processes() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var ps []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		ps = append(ps, procStat{pid: pid, pgrp: pgrp, zombie: f[0] == "Z" || f[0] == "X"})
	}
	return ps
}

// groupMembers lists the live (non-zombie) members of process group pgid.
func groupMembers(pgid int) []int {
	var pids []int
	for _, p := range processes() {
		if p.pgrp == pgid && !p.zombie {
			pids = append(pids, p.pid)
		}
	}
	return pids
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

// tailFile returns the last n lines of the file at path, or why it cannot.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const window = 256 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		if _, err := f.Seek(-window, io.SeekEnd); err != nil {
			return fmt.Sprintf("(cannot seek %s: %v)", path, err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
