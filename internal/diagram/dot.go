package diagram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
)

// dotFonts is the font list dot's labels default to (pango takes a
// comma-separated list): the document's Noto faces, so non-Latin labels
// print in them rather than in whatever fontconfig picks. A graph's own
// fontname attributes still win.
const dotFonts = "Noto Sans,Noto Sans CJK JP,Noto Naskh Arabic,Noto Sans Hebrew,Noto Sans Devanagari,Noto Sans Thai,Noto Sans Symbols,Noto Sans Symbols2"

// drawDot draws a Graphviz diagram with dot -Tpdf (cairo: labels are text,
// fonts embedded) in the same walls as the SVG converter (childproc.Run,
// which internal/images runs rsvg-convert in):
//
//   - dot reads the graph from stdin in an empty temporary folder, with an
//     environment of SERVER_NAME alone but for the locale: with SERVER_NAME
//     set and GV_FILE_PATH unset, Graphviz loads no file a graph names
//     (image=, shapefile=, imagepath=), so a graph cannot draw a file of
//     the server's into its PDF.
//   - Its own process group, killed whole at the end; a new user and
//     network namespace where the kernel allows them.
//   - rlimits (address space, CPU seconds, file size, no core, few files)
//     and nice 10 set on the started child before it is sent a byte.
//   - Timeout of wall clock, the PDF read into a capped buffer.
func (d *Drawer) drawDot(ctx context.Context, dg Diagram) (Drawing, error) {
	src := dropDotLinks(dg.Source)
	res, err := d.runDot(ctx, src, !d.cfg.noIsolate)
	if errors.Is(err, errNoNamespaces) {
		res, err = d.runDot(ctx, src, false)
	}
	if err != nil {
		return Drawing{}, err
	}
	timeout := d.cfg.timeout
	switch {
	case ctx.Err() != nil:
		return Drawing{}, fmt.Errorf("dot: %w", ctx.Err())
	case res.timedOut:
		return Drawing{}, resource(dg, fmt.Sprintf("drawing it took longer than %s", timeout), false)
	case res.Overflow:
		return Drawing{}, invalid(dg, 0, fmt.Sprintf("its PDF is larger than %d bytes", MaxPDFBytes))
	}
	if res.Err != nil {
		var ee *exec.ExitError
		if !errors.As(res.Err, &ee) {
			return Drawing{}, fmt.Errorf("dot: %w", res.Err)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			if s := ws.Signal(); s == syscall.SIGXCPU || s == syscall.SIGKILL {
				return Drawing{}, resource(dg, "drawing it used more CPU time than allowed", false)
			}
			return Drawing{}, resource(dg, fmt.Sprintf("dot stopped on it (%s; usually memory)", ws.Signal()), false)
		}
		msg := dotMessage(res.Stderr)
		low := strings.ToLower(msg)
		if strings.Contains(low, "out of memory") || strings.Contains(low, "cannot allocate") {
			return Drawing{}, resource(dg, "drawing it needs more memory than a diagram may use", false)
		}
		if msg == "" {
			msg = fmt.Sprintf("dot failed (exit status %d)", ee.ExitCode())
		}
		return Drawing{}, invalid(dg, sourceLine(msg), clean(msg))
	}
	if !bytes.HasPrefix(res.Output, []byte("%PDF-")) {
		return Drawing{}, invalid(dg, 0, "dot drew no PDF")
	}
	// Cairo writes the page dictionary inside a compressed object stream
	// on Debian 13 (Graphviz 12), so the size is read with a PDF parser.
	w, h, err := images.PageSize(res.Output)
	if err != nil || w <= 0 || h <= 0 {
		return Drawing{}, invalid(dg, 0, "dot drew a PDF without a page size")
	}
	if px := (w / 72 * 96) * (h / 72 * 96); px > MaxPixels {
		return Drawing{}, invalid(dg, 0, fmt.Sprintf("it draws %.0f × %.0f pixels, more than %d million", w/72*96, h/72*96, MaxPixels/1_000_000))
	}
	return Drawing{PDF: res.Output, Width: w, Height: h}, nil
}

// dotFileBytes is dot's RLIMIT_FSIZE: it writes to a pipe, which the limit
// does not cover; it keeps a library's cache file from filling the disk.
const dotFileBytes = 16 << 20

// dotRun is one finished dot process.
type dotRun struct {
	childproc.FilterResult
	timedOut bool
}

// runDot runs dot in rsvg-convert's walls (childproc.Run, shared with
// internal/images) in a fresh working folder, bounded by the diagram
// Timeout.
func (d *Drawer) runDot(ctx context.Context, src string, isolate bool) (dotRun, error) {
	work, err := os.MkdirTemp(d.cfg.TempDir, "outprint-dot-")
	if err != nil {
		return dotRun{}, fmt.Errorf("dot: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }() // best-effort cleanup of a temp folder
	tctx, cancel := context.WithTimeout(ctx, d.cfg.timeout)
	defer cancel()
	cpu := uint64((d.cfg.timeout + time.Second - 1) / time.Second)
	res, err := childproc.Run(tctx, childproc.Filter{
		Path: d.dot,
		Args: []string{"-Tpdf", "-Gfontname=" + dotFonts, "-Nfontname=" + dotFonts, "-Efontname=" + dotFonts},
		Env:  []string{"SERVER_NAME=outprint", "LANG=C.UTF-8", "HOME=" + work, "XDG_CACHE_HOME=" + work},
		Dir:  work, Input: []byte(src), MaxOutput: MaxPDFBytes, Isolate: isolate, Pdeathsig: true,
		Limits: []childproc.Limit{
			{Resource: unix.RLIMIT_AS, Cur: limits.RenderMemoryBytes, Max: limits.RenderMemoryBytes},
			{Resource: unix.RLIMIT_CPU, Cur: cpu, Max: cpu + 1},
			{Resource: unix.RLIMIT_FSIZE, Cur: dotFileBytes, Max: dotFileBytes},
			{Resource: unix.RLIMIT_CORE},
			{Resource: unix.RLIMIT_NOFILE, Cur: 256, Max: 256},
		},
	})
	if err != nil {
		if errors.Is(err, childproc.ErrNoNamespaces) {
			return dotRun{}, errNoNamespaces
		}
		return dotRun{}, fmt.Errorf("dot: %w", err)
	}
	return dotRun{FilterResult: res, timedOut: errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil}, nil
}

// dotMessage is the first error line dot wrote ("Error: <stdin>: syntax
// error in line 3 near '->'"), without the name of its input.
func dotMessage(stderr []byte) string {
	for _, l := range strings.Split(string(stderr), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "Error:") {
			l = strings.TrimSpace(strings.TrimPrefix(l, "Error:"))
			l = strings.TrimSpace(strings.TrimPrefix(l, "<stdin>:"))
			return l
		}
	}
	return strings.TrimSpace(string(stderr))
}
