package forms

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	qpdf    string        // qpdf's path
	prlimit string        // prlimit's path
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

// run executes qpdf with args in dir. The error is internal (fork
// failure, ctx cancelled); how qpdf ended is in the result.
func (s qpdfSandbox) run(ctx context.Context, dir string, args ...string) (qpdfResult, error) {
	return s.exec(ctx, dir, nil, args...)
}

// errStreamRead wraps the error of the reader of a streamed run.
var errStreamRead = errors.New("forms: reading qpdf's output")

// errStreamStopped is what qpdf's output pipe answers once the reader of a
// streamed run has stopped.
var errStreamStopped = errors.New("forms: the reader of qpdf's output stopped")

// runStream executes qpdf with args in dir and hands its output to read as
// it comes, instead of keeping it (maxOut does not apply). When read
// returns before the end — it has seen enough, or too much — qpdf's
// process group is killed at once, so a form that is refused early costs
// only the work qpdf did until then. read's error is returned wrapped in
// errStreamRead, with the result of the qpdf it stopped (killed, then); the other errors
// and the result are run's.
func (s qpdfSandbox) runStream(ctx context.Context, dir string, read func(io.Reader) error, args ...string) (qpdfResult, error) {
	return s.exec(ctx, dir, read, args...)
}

// exec runs qpdf under prlimit with the sandbox's bounds; stream, when
// set, reads its output as it comes (see runStream).
func (s qpdfSandbox) exec(ctx context.Context, dir string, stream func(io.Reader) error, args ...string) (qpdfResult, error) {
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, s.prlimit, s.argv(args)...)
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
	var sp *streamPipe
	if stream != nil {
		sp = newStreamPipe()
		cmd.Stdout = sp.pw
	}
	if err := cmd.Start(); err != nil {
		return qpdfResult{}, fmt.Errorf("start qpdf: %w", err)
	}
	pid := cmd.Process.Pid
	if sp != nil {
		sp.start(stream, pid)
	}
	// prlimit(1) set the rlimits before it ran qpdf; the priority is
	// lowered here, a moment after the start (qpdf keeps it across
	// prlimit's exec). A qpdf done already is no error.
	if err := childproc.Deprioritize(pid); err != nil && !errors.Is(err, syscall.ESRCH) {
		// The run is abandoned: the kill, the wait and the reader's
		// error only end it, and the Deprioritize error is the answer.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if sp != nil {
			_ = sp.stop()
		}
		return qpdfResult{}, fmt.Errorf("qpdf: %w", err)
	}
	werr := cmd.Wait()
	// Anything left in the group; ESRCH (nothing left) is the usual answer.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	var streamErr error
	if sp != nil {
		streamErr = sp.stop()
	}
	if ctx.Err() != nil {
		return qpdfResult{}, fmt.Errorf("qpdf: %w", ctx.Err())
	}
	res := qpdfResult{stdout: out.Bytes(), stderr: string(stderr.Bytes()), overflow: out.Over(),
		timedOut: errors.Is(tctx.Err(), context.DeadlineExceeded)}
	return res.exited(werr, streamErr)
}

// argv is prlimit's command line that runs qpdf with args under the
// sandbox's rlimits.
func (s qpdfSandbox) argv(args []string) []string {
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
		"--", s.qpdf,
	}
	return append(argv, args...)
}

// exited completes the result with how qpdf ended (werr, cmd.Wait's
// error): its exit status, or -1 and the signal that killed it. A wait
// error that is no exit status is internal, unless the run was stopped on
// purpose (output past maxOut, or the stream's reader stopped it).
func (r qpdfResult) exited(werr, streamErr error) (qpdfResult, error) {
	if werr == nil {
		return r, streamErr
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) {
		if r.overflow || streamErr != nil {
			r.exit = -1
			return r, streamErr
		}
		return qpdfResult{}, fmt.Errorf("qpdf: %w", werr)
	}
	r.exit = ee.ExitCode()
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.exit = -1
		r.signal = ws.Signal()
	}
	return r, streamErr
}

// streamPipe carries a streamed run's output to its reader.
type streamPipe struct {
	pr   *io.PipeReader
	pw   *io.PipeWriter
	errc chan error
}

func newStreamPipe() *streamPipe {
	pr, pw := io.Pipe()
	return &streamPipe{pr: pr, pw: pw, errc: make(chan error, 1)}
}

// start runs read on the pipe in its own goroutine, ended by the pipe
// (closed by stop once qpdf is gone) at the latest. When read fails, the
// process group pid is killed at once.
func (p *streamPipe) start(read func(io.Reader) error, pid int) {
	go func() {
		err := read(p.pr)
		// Whatever is still written fails, and qpdf with it.
		p.pr.CloseWithError(errStreamStopped)
		if err != nil {
			// qpdf may have ended already (ESRCH): nothing to stop then.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		p.errc <- err
	}()
}

// stop closes the pipe once qpdf is gone and waits for the reader; its
// error comes wrapped in errStreamRead.
func (p *streamPipe) stop() error {
	_ = p.pw.Close() // a PipeWriter's Close always returns nil
	if err := <-p.errc; err != nil {
		return fmt.Errorf("%w: %w", errStreamRead, err)
	}
	return nil
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
		return r.signalProblem(what), true
	case r.exit == 0 || r.exit == qpdfExitWarnings:
		return nil, false
	}
	return stderrProblem(what, r.stderr), true
}

// signalProblem is the resource problem of a qpdf killed by a signal: the
// CPU and file-size limits send their own, anything else is most likely
// the address-space limit failing an allocation.
func (r qpdfResult) signalProblem(what string) error {
	switch r.signal {
	case syscall.SIGXCPU, syscall.SIGKILL:
		return limits.Resource(what + " needs more CPU time than allowed")
	case syscall.SIGXFSZ:
		return limits.Resource(what + " would become larger than allowed")
	}
	return limits.Resource(fmt.Sprintf("reading %s stopped (%s; usually memory)", what, r.signal))
}

// stderrMessage is a kind of qpdf failure known by what it prints: any of
// the lower-case texts in stderr means msg.
type stderrMessage struct {
	texts []string
	msg   string
}

// stderrResources are the failures that are a bound hit (the message
// follows the PDF's name); they are tried first.
var stderrResources = []stderrMessage{
	{[]string{"bad_alloc", "out of memory", "std::length_error"}, " needs more memory than allowed"},
	{[]string{"file too large", "file size limit"}, " would become larger than allowed"},
}

// stderrRefusals are the reasons qpdf refuses a file, in the order they
// are tried: the first that matches names the reason.
var stderrRefusals = []stderrMessage{
	{[]string{"invalid password"}, "it is encrypted with a password; send it without the password"},
	{[]string{"not a pdf file", "can't find pdf header"}, "it is not a PDF file"},
	{[]string{"empty"}, "it is empty"},
	{[]string{"damaged", "unable to find trailer", "xref"}, "it is damaged beyond repair"},
}

// stderrProblem is the answer for a qpdf that exited with errors: a bound
// hit, or the file refused for the reason its stderr names.
func stderrProblem(what, stderr string) error {
	low := strings.ToLower(stderr)
	if m, ok := matchStderr(stderrResources, low); ok {
		return limits.Resource(what + m)
	}
	if m, ok := matchStderr(stderrRefusals, low); ok {
		return invalidPDF(m)
	}
	return invalidPDF("it cannot be read as a PDF")
}

// matchStderr is the message of the first entry of table whose texts
// appear in low.
func matchStderr(table []stderrMessage, low string) (string, bool) {
	for _, e := range table {
		for _, t := range e.texts {
			if strings.Contains(low, t) {
				return e.msg, true
			}
		}
	}
	return "", false
}

// invalidPDF is the 422 answer for an upload that is not a usable form.
func invalidPDF(msg string) error {
	return limits.Invalid(limits.Problem{
		Field: "pdf", Source: limits.SourceDocument, Code: CodeInvalidPDF, Message: "the PDF is not usable: " + msg,
	})
}
