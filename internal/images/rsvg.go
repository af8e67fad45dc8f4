package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"rsc.io/pdf"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/programs"
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

// svgToPDF converts one SVG to PDF with rsvg-convert in the sandbox, its
// empty working folder made in scratch (the render's folder: /tmp may be
// read-only in a container). The
// SVG should have passed prepareSVG; the sandbox does not rely on it. It
// returns the PDF, an *convError for a problem of the SVG, or an internal
// error (rsvg-convert missing, ctx cancelled, fork failure).
func (s sandbox) svgToPDF(ctx context.Context, scratch string, svg []byte) ([]byte, error) {
	bin, err := programs.Find(programs.RSVGConvert)
	if err != nil {
		return nil, fmt.Errorf("svg to pdf: %w", err)
	}
	work, err := os.MkdirTemp(scratch, "outprint-rsvg-")
	if err != nil {
		return nil, fmt.Errorf("svg to pdf: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()

	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res, err := s.run(tctx, bin, work, svg, s.isolate)
	if s.isolate && errors.Is(err, childproc.ErrNoNamespaces) {
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
	case res.Overflow:
		return nil, &convError{msg: fmt.Sprintf("it converts to a PDF of more than %d bytes", s.maxPDF)}
	}
	if res.Err != nil {
		var ee *exec.ExitError
		if !errors.As(res.Err, &ee) {
			return nil, fmt.Errorf("svg to pdf: %w", res.Err)
		}
		return nil, exitProblem(ee, res.Stderr, s.cpu)
	}
	if !bytes.HasPrefix(res.Output, []byte("%PDF-")) {
		return nil, &convError{msg: "the SVG converter produced no PDF"}
	}
	return res.Output, nil
}

// runResult is one finished converter process.
type runResult = childproc.FilterResult

// run runs rsvg-convert in the sandbox's walls (childproc.Run) and feeds
// it the SVG. The returned error is internal (or
// childproc.ErrNoNamespaces); how the process ended is in the result.
func (s sandbox) run(ctx context.Context, bin, work string, svg []byte, isolate bool) (runResult, error) {
	res, err := childproc.Run(ctx, childproc.Filter{
		Path: bin, Args: []string{"--format=pdf"}, Dir: work, Input: svg, MaxOutput: s.maxPDF,
		Limits: s.limits(), Isolate: isolate,
	})
	if err != nil && !errors.Is(err, childproc.ErrNoNamespaces) {
		return res, fmt.Errorf("svg to pdf: %w", err)
	}
	return res, err
}

// limits are the converter's rlimits (never above what it inherited).
func (s sandbox) limits() []childproc.Limit {
	return []childproc.Limit{
		{Resource: unix.RLIMIT_AS, Cur: s.memory, Max: s.memory},
		{Resource: unix.RLIMIT_CPU, Cur: s.cpu, Max: s.cpu + 1},
		{Resource: unix.RLIMIT_FSIZE, Cur: fileSizeLimit, Max: fileSizeLimit},
		{Resource: unix.RLIMIT_CORE},
		{Resource: unix.RLIMIT_NOFILE, Cur: 256, Max: 256},
	}
}

// exitProblem sorts a failed conversion: killed by a signal or out of
// memory is a resource problem (413), any other failure a broken SVG (422)
// described by the converter's first line of complaint. Its stderr is about
// the SVG read from stdin only, so it names no file of ours. cpuLimit is
// the converter's CPU-time limit in seconds: a SIGKILL before it was used
// up came from the kernel's OOM killer (the container's memory), not from
// the limit.
func exitProblem(ee *exec.ExitError, stderr []byte, cpuLimit uint64) error {
	text := string(stderr)
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		switch ws.Signal() {
		case syscall.SIGKILL:
			if used := ee.UserTime() + ee.SystemTime(); used < time.Duration(cpuLimit)*time.Second {
				return &convError{resource: true, msg: "its conversion needs more memory than the server has"}
			}
			return &convError{resource: true, msg: "its conversion used more CPU time than allowed"}
		case syscall.SIGXCPU:
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

// maxPageTreeDepth bounds the walk from a page up its /Parent chain for an
// inherited MediaBox (a PDF's page tree is a few levels deep; a cycle must
// not loop).
const maxPageTreeDepth = 32

// mediaBox returns the MediaBox of page v or the one it inherits from
// the page tree (a null value when there is none).
func mediaBox(v pdf.Value) pdf.Value {
	for i := 0; i < maxPageTreeDepth && v.Kind() == pdf.Dict; i++ {
		if b := v.Key("MediaBox"); b.Kind() == pdf.Array {
			return b
		}
		v = v.Key("Parent")
	}
	return pdf.Value{}
}

// boxNumbers returns the four numbers of box, false when one is not a
// number.
func boxNumbers(box pdf.Value) ([4]float64, bool) {
	var f [4]float64
	for i := range f {
		n := box.Index(i)
		if k := n.Kind(); k != pdf.Integer && k != pdf.Real {
			return f, false
		}
		f[i] = n.Float64()
	}
	return f, true
}

// PageSize reads the size in points of the first page of a PDF written by
// cairo (rsvg-convert, Graphviz's dot): its MediaBox, or the one it inherits from the page tree,
// read with a PDF parser. Cairo writes the page dictionary as plain text
// (librsvg 2.54, Debian 12) or inside a compressed object stream (librsvg
// 2.60, Debian 13) as it sees fit, so the bytes cannot be searched.
func PageSize(data []byte) (w, h float64, err error) {
	sizes, err := PageSizes(data, 1)
	if err != nil {
		return 0, 0, err
	}
	return sizes[0][0], sizes[0][1], nil
}

// PageSizes reads the size in points (width, height) of each of the
// first max pages of a PDF, as PageSize reads the first (Chromium's
// printer writes one page per diagram of a document).
func PageSizes(data []byte, max int) (sizes [][2]float64, err error) {
	// The parser panics on some malformed files; the PDF comes from our
	// converter, but a broken one must be an error, not a crash.
	defer func() {
		if r := recover(); r != nil {
			sizes, err = nil, fmt.Errorf("read the PDF's page size: malformed PDF (%v)", r)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("read the PDF's page size: %w", err)
	}
	n := min(r.NumPage(), max)
	if n < 1 {
		return nil, errors.New("read the PDF's page size: the PDF has no page")
	}
	for i := 1; i <= n; i++ {
		box := mediaBox(r.Page(i).V)
		if box.Kind() != pdf.Array || box.Len() != 4 {
			return nil, fmt.Errorf("read the PDF's page size: page %d has no MediaBox of four numbers", i)
		}
		f, ok := boxNumbers(box)
		if !ok {
			return nil, fmt.Errorf("read the PDF's page size: MediaBox %v is not four numbers", box)
		}
		w, h := math.Abs(f[2]-f[0]), math.Abs(f[3]-f[1])
		if !(w > 0 && h > 0) || math.IsInf(w, 0) || math.IsInf(h, 0) {
			return nil, fmt.Errorf("read the PDF's page size: MediaBox %v is empty", box)
		}
		sizes = append(sizes, [2]float64{w, h})
	}
	return sizes, nil
}
