package childproc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// ErrNoNamespaces says the kernel refused new user and network namespaces
// for a child (a container's seccomp profile, a kernel setting): the
// caller runs it again without them, behind its other walls.
var ErrNoNamespaces = errors.New("user namespaces not available")

// Filter is a run of a converter on untrusted input that reads it from
// stdin and writes its result to stdout (rsvg-convert, dot). Run gives it
// the walls the two share:
//
//   - its own process group, killed whole when ctx is done and after the
//     leader exited;
//   - new user and network namespaces when Isolate is set (an empty
//     loopback: nothing in it can connect anywhere), ErrNoNamespaces when
//     the kernel refuses them;
//   - the rlimits of Limits and the CPU priority Nice, set on the started
//     child before it is sent a byte of input, so there is no window in
//     which the input runs unbounded;
//   - stdout read into a buffer capped at MaxOutput, stderr kept to 4 KiB.
//
// The environment and the working folder are the caller's (Env, Dir).
type Filter struct {
	Path string
	Args []string
	Env  []string
	Dir  string
	// Input is written to the child's stdin.
	Input     []byte
	MaxOutput int
	Limits    []Limit
	Isolate   bool
	// Pdeathsig kills the child if the OS thread that started it ends.
	Pdeathsig bool
}

// FilterResult is how a Filter's process ended.
type FilterResult struct {
	Output, Stderr []byte
	// Overflow: the output passed MaxOutput and the process was stopped.
	Overflow bool
	// Err is Wait's: an *exec.ExitError, or nil.
	Err error
}

// Run runs f until it exits or ctx is done (the whole group killed). Its
// error is internal (start, rlimits) or ErrNoNamespaces; how the process
// ended is in the result.
func Run(ctx context.Context, f Filter) (FilterResult, error) {
	cmd := exec.CommandContext(ctx, f.Path, f.Args...)
	cmd.Env = f.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = f.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if f.Pdeathsig {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if f.Isolate {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	}
	// On ctx done, kill the whole group, not only the leader.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// After the kill, Wait gives the pipes this long to drain; a grandchild
	// holding them open cannot stall us.
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return FilterResult{}, err
	}
	out := &Capped{Max: f.MaxOutput}
	stderr := &Capped{Max: 4 << 10, Truncate: true}
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Start(); err != nil {
		// Start closed the pipe already when it failed; this Close only
		// makes sure (its os.ErrClosed is expected).
		_ = stdin.Close()
		if f.Isolate && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
			errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES)) {
			return FilterResult{}, fmt.Errorf("%w: %v", ErrNoNamespaces, err)
		}
		return FilterResult{}, fmt.Errorf("start %s: %w", f.Path, err)
	}
	pid := cmd.Process.Pid
	lerr := Deprioritize(pid)
	if lerr == nil {
		lerr = Lower(pid, f.Limits...)
	}
	if lerr != nil {
		// The child is thrown away and lerr is the error: the kill fails
		// only when the group is gone already (ESRCH), Wait reaps the
		// leader and reports the kill, and Close is Wait's to do anyway.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = stdin.Close()
		_ = cmd.Wait()
		return FilterResult{}, fmt.Errorf("rlimits: %w", lerr)
	}
	// The writer goroutine is owned by Run: it ends when the input is
	// written or when Wait closes the pipe after the process exited, and
	// Run waits for it before returning. An early exit (a parse error)
	// makes the write fail with EPIPE, which is not an error of ours.
	written := make(chan struct{})
	go func() {
		defer close(written)
		_, _ = stdin.Write(f.Input)
		_ = stdin.Close()
	}()
	werr := cmd.Wait()
	// The leader is gone; anything left in its group goes too (ESRCH when
	// there is nothing, which is the normal case).
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-written
	return FilterResult{Output: out.Bytes(), Stderr: stderr.Bytes(), Overflow: out.Over(), Err: werr}, nil
}
