package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/limits"
)

// sandbox holds the bounds of one SVG conversion process.
//
// How an SVG is kept from reading files or reaching the network:
//
//   - rsvg-convert reads the SVG from stdin. librsvg resolves an href or
//     url() only against the document's base URL, and a document read from
//     stdin has none, so it can load no file, relative or absolute; it has
//     no network loader at all (only file: and data:). This is the main
//     wall; checkSVG refusing every outside reference is the first.
//   - The process gets an empty environment (no HOME, proxy, credentials,
//     no GIO or fontconfig overrides) and an empty temporary folder as its
//     working directory.
//   - It runs in its own process group; on timeout or cancellation the
//     whole group is killed with SIGKILL, and once more after it exited, so
//     no helper it might have spawned survives.
//   - Where the kernel allows unprivileged user namespaces, it also runs in
//     a new user and network namespace, whose only interface is a loopback
//     that is down, so even a bug in the renderer could not connect
//     anywhere. Where they are not allowed (a container's seccomp profile),
//     the process runs without them and the walls above still hold.
//   - rlimits (address space, CPU seconds, file size, no core dumps, open
//     files) are set with prlimit(2) on the child right after it started
//     and before it is sent a single byte of the SVG: a process cannot
//     render what it has not read, so there is no window in which the SVG
//     runs unbounded. This avoids re-executing ourselves (awkward from test
//     binaries) and the prlimit(1) program.
type sandbox struct {
	timeout time.Duration // wall clock, limits.SVGTimeout
	memory  uint64        // RLIMIT_AS in bytes
	cpu     uint64        // RLIMIT_CPU in seconds (SIGXCPU, then SIGKILL one second later)
	maxPDF  int           // bytes of PDF read before the conversion is stopped
	// isolate asks for new user and network namespaces when the kernel
	// allows them.
	isolate bool
}

// defaultSandbox is the sandbox of SPEC §3 and §7.
func defaultSandbox() sandbox {
	return sandbox{
		timeout: limits.SVGTimeout,
		memory:  limits.RenderMemoryBytes,
		cpu:     uint64(limits.SVGTimeout / time.Second),
		maxPDF:  limits.MaxTotalImageBytes,
		isolate: true,
	}
}

// fileSizeLimit is RLIMIT_FSIZE of the converter. It writes its PDF to a
// pipe, which the limit does not cover; the limit only keeps a library that
// writes a cache file (fontconfig) from filling the disk.
const fileSizeLimit = 16 << 20

// convError is a conversion that failed because of the image: a broken
// file or drawing (resource false, a 422 image problem) or an SVG that needs
// more time or memory than allowed (resource true, 413).
type convError struct {
	resource bool
	msg      string
}

func (e *convError) Error() string { return e.msg }

// svgToPDF converts one SVG to PDF with rsvg-convert in the sandbox. The
// SVG should have passed prepareSVG; the sandbox does not rely on it. It
// returns the PDF, an *convError for a problem of the SVG, or an internal
// error (rsvg-convert missing, ctx cancelled, fork failure).
func (s sandbox) svgToPDF(ctx context.Context, svg []byte) ([]byte, error) {
	bin, err := exec.LookPath("rsvg-convert")
	if err != nil {
		return nil, fmt.Errorf("svg to pdf: %w", err)
	}
	work, err := os.MkdirTemp("", "outprint-rsvg-")
	if err != nil {
		return nil, fmt.Errorf("svg to pdf: %w", err)
	}
	defer os.RemoveAll(work)

	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := s.run(tctx, bin, work, svg, s.isolate)
	if s.isolate && errors.Is(err, errNoNamespaces) {
		res, err = s.run(tctx, bin, work, svg, false)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("svg to pdf: %w", ctx.Err())
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		return nil, &convError{resource: true, msg: fmt.Sprintf("its conversion took longer than %s", s.timeout)}
	case res.overflow:
		return nil, &convError{msg: fmt.Sprintf("it converts to a PDF of more than %d bytes", s.maxPDF)}
	}
	if res.err != nil {
		var ee *exec.ExitError
		if !errors.As(res.err, &ee) {
			return nil, fmt.Errorf("svg to pdf: %w", res.err)
		}
		return nil, exitProblem(ee, res.stderr)
	}
	if !bytes.HasPrefix(res.pdf, []byte("%PDF-")) {
		return nil, &convError{msg: "the SVG converter produced no PDF"}
	}
	return res.pdf, nil
}

// errNoNamespaces says the kernel refused new namespaces for the child.
var errNoNamespaces = errors.New("user namespaces not available")

// runResult is one finished converter process.
type runResult struct {
	pdf      []byte
	stderr   []byte
	overflow bool  // the PDF exceeded maxPDF and the process was stopped
	err      error // from Wait: an *exec.ExitError or a copy failure
}

// run starts rsvg-convert, bounds it and feeds it the SVG. The returned
// error is internal (or errNoNamespaces); how the process ended is in the
// result.
func (s sandbox) run(ctx context.Context, bin, work string, svg []byte, isolate bool) (runResult, error) {
	cmd := exec.CommandContext(ctx, bin, "--format=pdf")
	cmd.Env = []string{}
	cmd.Dir = work
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if isolate {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	}
	// On ctx done, kill the whole group, not only the leader.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// After the kill, Wait gives the pipes this long to drain; a grandchild
	// holding them open cannot stall us.
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return runResult{}, fmt.Errorf("svg to pdf: %w", err)
	}
	out := &childproc.Capped{Max: s.maxPDF}
	stderr := &childproc.Capped{Max: 4 << 10, Truncate: true}
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Start(); err != nil {
		stdin.Close()
		if isolate && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
			errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES)) {
			return runResult{}, fmt.Errorf("%w: %v", errNoNamespaces, err)
		}
		return runResult{}, fmt.Errorf("svg to pdf: start %s: %w", bin, err)
	}
	pid := cmd.Process.Pid
	if err := s.setLimits(pid); err != nil {
		syscall.Kill(-pid, syscall.SIGKILL)
		stdin.Close()
		cmd.Wait()
		return runResult{}, fmt.Errorf("svg to pdf: rlimits: %w", err)
	}
	// The writer goroutine is owned by run: it ends when the SVG is written
	// or when Wait closes the pipe after the process exited, and run waits
	// for it before returning. An early exit (a parse error) makes the
	// write fail with EPIPE, which is not an error of ours.
	written := make(chan struct{})
	go func() {
		defer close(written)
		stdin.Write(svg)
		stdin.Close()
	}()
	werr := cmd.Wait()
	// The leader is gone; anything left in its group goes too (ESRCH when
	// there is nothing, which is the normal case).
	syscall.Kill(-pid, syscall.SIGKILL)
	<-written
	return runResult{pdf: out.Bytes(), stderr: stderr.Bytes(), overflow: out.Over(), err: werr}, nil
}

// setLimits lowers the rlimits of the child pid (never above what it
// inherited) and its CPU priority.
func (s sandbox) setLimits(pid int) error {
	if err := childproc.Deprioritize(pid); err != nil {
		return err
	}
	return childproc.Lower(pid,
		childproc.Limit{Resource: unix.RLIMIT_AS, Cur: s.memory, Max: s.memory},
		childproc.Limit{Resource: unix.RLIMIT_CPU, Cur: s.cpu, Max: s.cpu + 1},
		childproc.Limit{Resource: unix.RLIMIT_FSIZE, Cur: fileSizeLimit, Max: fileSizeLimit},
		childproc.Limit{Resource: unix.RLIMIT_CORE},
		childproc.Limit{Resource: unix.RLIMIT_NOFILE, Cur: 256, Max: 256},
	)
}

// exitProblem sorts a failed conversion: killed by a signal or out of
// memory is a resource problem (413), any other failure a broken SVG (422)
// described by the converter's first line of complaint. Its stderr is about
// the SVG read from stdin only, so it names no file of ours.
func exitProblem(ee *exec.ExitError, stderr []byte) error {
	text := string(stderr)
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		switch ws.Signal() {
		case syscall.SIGXCPU, syscall.SIGKILL:
			return &convError{resource: true, msg: "its conversion used more CPU time than allowed"}
		default:
			return &convError{resource: true, msg: fmt.Sprintf("the SVG converter stopped on it (%s; usually memory)", ws.Signal())}
		}
	}
	low := strings.ToLower(text)
	if strings.Contains(low, "nomemory") || strings.Contains(low, "memory allocation") || strings.Contains(low, "out of memory") {
		return &convError{resource: true, msg: "its conversion needs more memory than allowed"}
	}
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.TrimSpace(strings.TrimPrefix(line, "Error reading SVG stdin:"))
	if line == "" {
		return &convError{msg: fmt.Sprintf("the SVG cannot be drawn (converter exit status %d)", ee.ExitCode())}
	}
	return &convError{msg: "the SVG cannot be drawn: " + display(printable(line))}
}

// printable drops control characters from converter output before it
// becomes client text.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7F {
			return ' '
		}
		return r
	}, s)
}

// mediaBox matches the page size cairo writes into its PDFs, uncompressed,
// as "/MediaBox [ 0 0 480 270 ]".
var mediaBox = regexp.MustCompile(`/MediaBox\s*\[\s*(-?[0-9.]+)\s+(-?[0-9.]+)\s+(-?[0-9.]+)\s+(-?[0-9.]+)\s*\]`)

// pageSize reads the size in points of the (single) page of a PDF written
// by rsvg-convert.
func pageSize(pdf []byte) (w, h float64, ok bool) {
	m := mediaBox.FindSubmatch(pdf)
	if m == nil {
		return 0, 0, false
	}
	var f [4]float64
	for i := range f {
		v, err := strconv.ParseFloat(string(m[i+1]), 64)
		if err != nil {
			return 0, 0, false
		}
		f[i] = v
	}
	w, h = f[2]-f[0], f[3]-f[1]
	return w, h, w > 0 && h > 0
}
