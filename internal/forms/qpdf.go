package forms

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/limits"
)

// Every byte of an uploaded PDF is parsed by qpdf in a process of its own,
// never by outprint: a hostile PDF (objects nested thousands deep, reference
// loops, an object stream claiming millions of objects, a stream that
// inflates to gigabytes) can at worst kill that process. The process is
// bounded like a TeX process (SPEC §7): the same address-space limit
// (limits.RenderMemoryBytes) and process limit, a CPU-time limit of the
// render timeout, a
// file-size limit just over the PDF size limit (the output it writes), no
// core dumps, few open files, an empty environment and its own process group,
// killed whole when the context ends.
//
// The limits are set by prlimit(1) before it executes qpdf, so qpdf never
// runs a single instruction unbounded; unlike the TeX and SVG sandboxes,
// which lower the limits of the child right after it started, there is no
// window at all, and qpdf reads its input from a file, not from a pipe we
// could hold back until the limits are in place. prlimit is part of
// util-linux, which every Debian system has.

// qpdfSandbox holds the bounds of one qpdf process.
type qpdfSandbox struct {
	memory  uint64        // RLIMIT_AS, bytes
	cpu     time.Duration // RLIMIT_CPU (rounded up to seconds)
	fsize   int64         // RLIMIT_FSIZE, bytes
	maxOut  int           // bytes of stdout kept before the process is stopped
	timeout time.Duration // wall clock
}

// qpdfResult is one finished qpdf process.
type qpdfResult struct {
	stdout   []byte
	stderr   string
	exit     int // exit status; -1 when killed by a signal
	signal   syscall.Signal
	overflow bool // stdout exceeded maxOut
	timedOut bool
}

// qpdf's exit statuses (qpdf --help=exit-status): 2 errors, 3 warnings only.
const (
	qpdfExitErrors   = 2
	qpdfExitWarnings = 3
)

// run executes qpdf with args in dir. The error is internal (qpdf or
// prlimit missing, fork failure, ctx cancelled); how qpdf ended is in the
// result.
func (s qpdfSandbox) run(ctx context.Context, dir string, args ...string) (qpdfResult, error) {
	qpdf, err := exec.LookPath("qpdf")
	if err != nil {
		return qpdfResult{}, fmt.Errorf("qpdf: %w", err)
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		return qpdfResult{}, fmt.Errorf("prlimit: %w", err)
	}
	cpu := max(int64((s.cpu+time.Second-1)/time.Second), 1)
	argv := []string{
		"--as=" + strconv.FormatUint(s.memory, 10),
		// SIGXCPU at the soft limit, SIGKILL one second later.
		"--cpu=" + strconv.FormatInt(cpu, 10) + ":" + strconv.FormatInt(cpu+1, 10),
		"--fsize=" + strconv.FormatInt(s.fsize, 10),
		"--core=0",
		// As for TeX; qpdf never forks, so this only matters if it did.
		"--nproc=" + strconv.Itoa(limits.RenderProcesses),
		"--nofile=64",
		"--", qpdf,
	}
	argv = append(argv, args...)
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, prlimit, argv...)
	cmd.Dir = dir
	// Nothing of ours is inherited: no secrets, no locale surprises. qpdf
	// reads no configuration from the environment.
	cmd.Env = []string{"LC_ALL=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	out := &childproc.Capped{Max: s.maxOut}
	stderr := &childproc.Capped{Max: 8 << 10, Truncate: true}
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Start(); err != nil {
		return qpdfResult{}, fmt.Errorf("start qpdf: %w", err)
	}
	pid := cmd.Process.Pid
	// prlimit(1) set the rlimits before it ran qpdf; the priority is
	// lowered here, a moment after the start (qpdf keeps it across
	// prlimit's exec). A qpdf done already is no error.
	if err := childproc.Deprioritize(pid); err != nil && !errors.Is(err, syscall.ESRCH) {
		syscall.Kill(-pid, syscall.SIGKILL)
		cmd.Wait()
		return qpdfResult{}, fmt.Errorf("qpdf: %w", err)
	}
	werr := cmd.Wait()
	syscall.Kill(-pid, syscall.SIGKILL) // anything left in the group
	if ctx.Err() != nil {
		return qpdfResult{}, fmt.Errorf("qpdf: %w", ctx.Err())
	}
	res := qpdfResult{stdout: out.Bytes(), stderr: string(stderr.Bytes()), overflow: out.Over(),
		timedOut: errors.Is(tctx.Err(), context.DeadlineExceeded)}
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			if res.overflow {
				res.exit = -1
				return res, nil
			}
			return qpdfResult{}, fmt.Errorf("qpdf: %w", werr)
		}
		res.exit = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.exit = -1
			res.signal = ws.Signal()
		}
	}
	return res, nil
}

// problem turns a qpdf run that failed into the client's answer: a resource
// problem (KindTooLarge) when it was stopped by a bound, an invalid_pdf
// problem (KindDocument) when qpdf refused the file. what names the PDF for messages ("the
// form", "the filled form"). ok is false when the run succeeded (exit 0 or
// warnings only).
func (r qpdfResult) problem(what string, timeout time.Duration) (err error, failed bool) {
	switch {
	case r.timedOut:
		return &limits.Error{Kind: limits.KindTimeout, Problems: []limits.Problem{{
			Field: "pdf", Source: limits.SourceDocument, Code: limits.CodeTimeout,
			Message: fmt.Sprintf("reading %s took too long (limit %s)", what, timeout),
		}}}, true
	case r.overflow:
		return limits.Resource(what + " describes more data than may be read"), true
	case r.exit == -1:
		switch r.signal {
		case syscall.SIGXCPU, syscall.SIGKILL:
			return limits.Resource(what + " needs more CPU time than allowed"), true
		case syscall.SIGXFSZ:
			return limits.Resource(what + " would become larger than allowed"), true
		default:
			return limits.Resource(fmt.Sprintf("reading %s stopped (%s; usually memory)", what, r.signal)), true
		}
	case r.exit == 0 || r.exit == qpdfExitWarnings:
		return nil, false
	}
	low := strings.ToLower(r.stderr)
	if strings.Contains(low, "bad_alloc") || strings.Contains(low, "out of memory") || strings.Contains(low, "std::length_error") {
		return limits.Resource(what + " needs more memory than allowed"), true
	}
	if strings.Contains(low, "file too large") || strings.Contains(low, "file size limit") {
		return limits.Resource(what + " would become larger than allowed"), true
	}
	msg := "it cannot be read as a PDF"
	switch {
	case strings.Contains(low, "invalid password"):
		msg = "it is encrypted with a password; send it without the password"
	case strings.Contains(low, "not a pdf file") || strings.Contains(low, "can't find pdf header"):
		msg = "it is not a PDF file"
	case strings.Contains(low, "empty"):
		msg = "it is empty"
	case strings.Contains(low, "damaged") || strings.Contains(low, "unable to find trailer") || strings.Contains(low, "xref"):
		msg = "it is damaged beyond repair"
	}
	return invalidPDF(msg), true
}

// invalidPDF is the 422 answer for an upload that is not a usable form.
func invalidPDF(msg string) error {
	return limits.Invalid(limits.Problem{
		Field: "pdf", Source: limits.SourceDocument, Code: CodeInvalidPDF, Message: "the PDF is not usable: " + msg,
	})
}
