package proc

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

// Group is a component of a test harness (etcd, kube-apiserver, the kubelet,
// containerd) running as a child process with its stdout and stderr in a log
// file, waited for until ready and stopped together with everything it forked.
//
// The child leads its own process group (Setpgid) so Stop can signal everything
// it might have forked, and it gets SIGKILL from the kernel when its parent dies
// (Pdeathsig), so a test binary killed by a timeout leaves nothing behind. Linux
// delivers Pdeathsig when the forking *thread* exits; the Go runtime only retires
// threads that a goroutine locked and never unlocked, which callers must not do
// around StartGroup, so in practice the signal means "the test process died".
type Group struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	// done is closed once the process has exited and been reaped; waitErr is
	// written before that.
	done    chan struct{}
	waitErr error
}

// StartGroup starts path with args as the leader of a new process group,
// appending its output to logPath. A nil env inherits this process's
// environment.
func StartGroup(name, path string, args, env []string, logPath string) (*Group, error) {
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
	g := &Group{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		g.waitErr = cmd.Wait()
		logFile.Close()
		close(g.done)
	}()
	return g, nil
}

// Name is the component's name, as given to StartGroup.
func (g *Group) Name() string { return g.name }

// Pid is the leader's process ID, which is also the group's ID.
func (g *Group) Pid() int { return g.cmd.Process.Pid }

// LogPath is the file the component's output goes to.
func (g *Group) LogPath() string { return g.logPath }

// Done is closed once the leader has exited and been reaped.
func (g *Group) Done() <-chan struct{} { return g.done }

// Exited reports whether the leader has exited, and how.
func (g *Group) Exited() (exited bool, err error) {
	select {
	case <-g.done:
		return true, g.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, escalates to SIGKILL after timeout,
// and returns once the leader is reaped and no live member of the group is
// left. It reports an error if the leader had already died on its own (a crash
// the caller should see, with the end of its log) or if the group outlives the
// SIGKILL.
func (g *Group) Stop(timeout time.Duration) error {
	if exited, err := g.Exited(); exited {
		g.killGroup()
		crash := fmt.Errorf("%s had exited before stop: %v; last lines of %s:\n%s", g.name, err, g.logPath, TailFile(g.logPath, 20))
		return errors.Join(crash, g.waitGroupGone(timeout))
	}
	if err := syscall.Kill(-g.Pid(), syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling %s: %w", g.name, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-g.done:
	case <-timer.C:
		g.killGroup()
		<-g.done
	}
	// The leader is gone; anything it forked into its group must go too.
	g.killGroup()
	return g.waitGroupGone(timeout)
}

func (g *Group) killGroup() { _ = syscall.Kill(-g.Pid(), syscall.SIGKILL) }

// waitGroupGone polls until no live member of the process group is left.
// SIGKILL is delivered asynchronously, and orphans become zombies until init
// reaps them, which in containers can take seconds; a zombie runs nothing and
// holds no port, so it counts as gone.
func (g *Group) waitGroupGone(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		alive, err := LiveGroupMembers(g.Pid())
		if err == nil && len(alive) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d of %s still has live members %v %v after SIGKILL (%v)", g.Pid(), g.name, alive, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitReady polls check until it succeeds, the process exits, ctx ends or
// timeout passes. Failures carry the tail of the component's log, because that
// is where the reason is.
func (g *Group) WaitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	var last error
	for {
		checkCtx, checkCancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(checkCtx)
		checkCancel()
		if last == nil {
			return nil
		}
		select {
		case <-g.done:
			return fmt.Errorf("%s exited while starting (%v); last lines of %s:\n%s",
				g.name, g.waitErr, g.logPath, TailFile(g.logPath, 30))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v: %w (last check: %v); last lines of %s:\n%s",
				g.name, timeout, ctx.Err(), last, g.logPath, TailFile(g.logPath, 30))
		case <-ticker.C:
		}
	}
}

// Stat is what /proc/<pid>/stat says of a process that harnesses need.
type Stat struct {
	PID, PGRP int
	// Zombie: exited and not yet reaped (state Z or X); it runs nothing.
	Zombie bool
}

// Processes lists the processes visible in /proc. Inside a PID namespace that
// is only the namespace's own.
func Processes() ([]Stat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var ps []Stat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
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
		pgrp, err := strconv.Atoi(f[2])
		if err != nil {
			continue
		}
		ps = append(ps, Stat{PID: pid, PGRP: pgrp, Zombie: f[0] == "Z" || f[0] == "X"})
	}
	return ps, nil
}

// LiveGroupMembers lists the processes in group pgid that are not zombies.
func LiveGroupMembers(pgid int) ([]int, error) {
	ps, err := Processes()
	if err != nil {
		return nil, err
	}
	var alive []int
	for _, p := range ps {
		if p.PGRP == pgid && !p.Zombie {
			alive = append(alive, p.PID)
		}
	}
	return alive, nil
}

// TailFile returns the last n lines of the file at path, or a note saying why
// it cannot: it feeds failure reports.
func TailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	// Component logs grow to megabytes; the tail is in the last few hundred KiB.
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
