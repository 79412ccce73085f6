package testcluster

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

// process is one control-plane component running as a child process, with its
// stdout and stderr in a log file.
//
// The child leads its own process group (Setpgid) so stop can signal everything
// it might have forked, and it gets SIGKILL from the kernel when its parent dies
// (Pdeathsig), so a test binary killed by a timeout leaves nothing behind. Linux
// delivers Pdeathsig when the forking *thread* exits; the Go runtime only retires
// threads that a goroutine locked and never unlocked, which this package does not
// do, so in practice the signal means "the test process died".
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	// done is closed once the process has exited and been reaped; waitErr is
	// written before that.
	done    chan struct{}
	waitErr error
}

func startProcess(name, path string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "# %s %s\n", path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
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

// exitErr reports whether the process has exited, and how.
func (p *process) exitErr() (exited bool, err error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, escalates to SIGKILL after timeout,
// and returns once the process is reaped. It reports an error only if the
// process had already died on its own: that is a crash the caller should see.
func (p *process) stop(timeout time.Duration) error {
	if exited, err := p.exitErr(); exited {
		p.killGroup()
		return errors.Join(fmt.Errorf("%s had exited before stop: %v", p.name, err), p.waitGroupGone(timeout))
	}
	pgid := p.pid()
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling %s: %w", p.name, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.killGroup()
		<-p.done
	}
	// The leader is gone; anything it forked into its group must go too.
	p.killGroup()
	return p.waitGroupGone(timeout)
}

// waitGroupGone polls until no live member of the process group is left.
// SIGKILL is delivered asynchronously, and orphans become zombies until init
// reaps them, which in containers can take seconds; a zombie runs nothing and
// holds no port, so it counts as gone.
func (p *process) waitGroupGone(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		alive, err := liveGroupMembers(p.pid())
		if err == nil && len(alive) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d of %s still has live members %v %v after SIGKILL (%v)", p.pid(), p.name, alive, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// liveGroupMembers lists the processes in group pgid that are not zombies,
// read from /proc.
func liveGroupMembers(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var alive []int
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
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			alive = append(alive, pid)
		}
	}
	return alive, nil
}

func (p *process) killGroup() {
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
}

// waitReady polls check until it succeeds, the process exits, ctx ends or
// timeout passes. Failures carry the tail of the component's log, because that
// is where the reason is.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
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
		case <-p.done:
			return fmt.Errorf("%s exited while starting (%v); last lines of %s:\n%s",
				p.name, p.waitErr, p.logPath, tailFile(p.logPath, 30))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v: %w (last check: %v); last lines of %s:\n%s",
				p.name, timeout, ctx.Err(), last, p.logPath, tailFile(p.logPath, 30))
		case <-ticker.C:
		}
	}
}

// tailFile returns the last n lines of the file at path, or a note saying why
// it cannot.
func tailFile(path string, n int) string {
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
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
