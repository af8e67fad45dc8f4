// Package raster draws pages of a PDF as PNG images, for the thumbnails of
// a job's result (GET /v1/jobs/{id}/pages/{n}.png). The PDF is one outprint
// made, but a page may still be expensive to draw (a huge image, a deep
// vector drawing), and poppler is a large C library: it runs as
// `pdftoppm` in its own process with the walls of TeX and rsvg-convert —
// an empty environment and folder, its own process group killed as a
// whole, new user and network namespaces where the kernel allows them, and
// rlimits on memory, CPU, file size and open files set before it is sent a
// byte, at a CPU priority below TeX's (Nice). A drawing that needs more
// is refused, never waited for.
package raster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/programs"
)

// Defaults of a Rasterizer (see Config).
const (
	DefaultTimeout = 10 * time.Second
	DefaultMemory  = 1 << 30 // RLIMIT_AS, the memory limit of a TeX process
	DefaultMaxPNG  = 8 << 20
	// DefaultMaxPixels bounds the area of one drawing: pdftoppm holds the
	// whole bitmap (3 bytes a pixel) in memory, and a page of 123×14,400
	// pt drawn 1,600 px wide is 1,600×187,318 px, 1.2 GB (issue 24). A
	// page taller than the bound is drawn from its top, cropped (4 Mpx:
	// an A4 page 1,600 px wide is 3.6 Mpx).
	DefaultMaxPixels = 4_000_000
	MinWidth         = 16
	MaxWidth         = 2000
	fileSizeLimit    = 16 << 20
	openFilesLimit   = 256
	stderrKeepBytes  = 2 << 10
)

// Nice is the nice value pdftoppm runs at: above TeX's (childproc.Nice,
// 10), since a preview is the least urgent work of the service. When a
// drawing and a render want the same processor, the kernel gives TeX
// about three times the share of the drawing (each nice step is a factor
// of about 1.25); on an idle machine the drawing gets the whole processor
// all the same.
const Nice = 15

// WallFactor is how many times Timeout a drawing may take in wall-clock
// time. Its cost is bounded by its CPU time (RLIMIT_CPU, Timeout): a
// drawing runs below TeX's priority (Nice), so on a machine whose
// processors TeX keeps busy it may wait for one about three times as long
// as it runs (the share nice 15 gets beside nice 10), and that wait says
// nothing about the page.
const WallFactor = 3

// Config bounds a Rasterizer. Zero values take the defaults above.
type Config struct {
	// Timeout bounds one drawing's CPU time (RLIMIT_CPU, whole seconds);
	// its wall-clock time is bounded by WallFactor times as much.
	Timeout time.Duration
	// Memory is the address-space limit of the process in bytes.
	Memory uint64
	// MaxPNG bounds the PNG read back; a larger one is an error.
	MaxPNG int
	// MaxPixels bounds the area drawn (default DefaultMaxPixels): a page
	// whose drawing would be larger is cropped to its top part.
	MaxPixels int
	// TempDir is where each drawing's empty working folder is made
	// (default os.TempDir()); the server passes its data folder's, since
	// /tmp may be read-only in a container.
	TempDir string
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Memory == 0 {
		c.Memory = DefaultMemory
	}
	if c.MaxPNG <= 0 {
		c.MaxPNG = DefaultMaxPNG
	}
	if c.MaxPixels <= 0 {
		c.MaxPixels = DefaultMaxPixels
	}
	if c.TempDir == "" {
		c.TempDir = os.TempDir()
	}
	return c
}

// Rasterizer draws pages with pdftoppm in a sandboxed process. It is safe
// for concurrent use; each call is its own process.
type Rasterizer struct {
	cfg Config
	bin string
}

// New returns a Rasterizer, or an error when pdftoppm is not installed.
func New(cfg Config) (*Rasterizer, error) {
	bin, err := programs.Find(programs.PDFToPPM)
	if err != nil {
		return nil, fmt.Errorf("raster: %w", err)
	}
	return &Rasterizer{cfg: cfg.WithDefaults(), bin: bin}, nil
}

// ErrTooCostly is a page that needs more CPU time, memory or output than
// the bounds allow: a property of the page, which a caller may remember.
var ErrTooCostly = errors.New("the page is too costly to draw")

// ErrBusy is a drawing that ran out of wall-clock time (WallFactor ×
// Timeout) before its CPU time: it waited for a processor that busier
// work had, which says nothing about the page. Asking again later may
// succeed; nothing is to be remembered.
var ErrBusy = errors.New("the server was too busy to draw the page in time")

// Page draws page (1-based) of pdf as a PNG width pixels wide (the height
// keeps the page's proportions). width must be within MinWidth and
// MaxWidth.
func (r *Rasterizer) Page(ctx context.Context, pdf []byte, page, width int) ([]byte, error) {
	if width < MinWidth || width > MaxWidth {
		return nil, fmt.Errorf("raster: width %d outside %d..%d", width, MinWidth, MaxWidth)
	}
	if page < 1 {
		return nil, fmt.Errorf("raster: page %d", page)
	}
	work, err := os.MkdirTemp(r.cfg.TempDir, "outprint-raster-")
	if err != nil {
		return nil, fmt.Errorf("raster: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	tctx, cancel := context.WithTimeout(ctx, WallFactor*r.cfg.Timeout)
	defer cancel()
	out, err := r.run(tctx, work, pdf, page, width, true)
	if errors.Is(err, errNoNamespaces) {
		out, err = r.run(tctx, work, pdf, page, width, false)
	}
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("raster page %d: %w", page, ctx.Err())
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("raster page %d: %w (no drawing within %s)", page, ErrBusy, WallFactor*r.cfg.Timeout)
	case err != nil:
		return nil, fmt.Errorf("raster page %d: %w", page, err)
	}
	if !bytes.HasPrefix(out, []byte("\x89PNG\r\n\x1a\n")) {
		return nil, fmt.Errorf("raster page %d: pdftoppm wrote no PNG", page)
	}
	return out, nil
}

var errNoNamespaces = errors.New("user namespaces not available")

// run starts pdftoppm on stdin, bounds it, feeds it the PDF and returns
// its stdout.
func (r *Rasterizer) run(ctx context.Context, work string, pdf []byte, page, width int, isolate bool) ([]byte, error) {
	cmd := r.command(ctx, work, page, width, isolate)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out := &childproc.Capped{Max: r.cfg.MaxPNG}
	stderr := &childproc.Capped{Max: stderrKeepBytes, Truncate: true}
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Start(); err != nil {
		_ = stdin.Close()
		if isolate && namespaceRefused(err) {
			return nil, errNoNamespaces
		}
		return nil, fmt.Errorf("start %s: %w", r.bin, err)
	}
	pid := cmd.Process.Pid
	if err := r.bound(pid); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, err
	}
	// Owned by run: it ends when the PDF is written or the pipe closes
	// after the process exited; run waits for it.
	written := make(chan struct{})
	go func() {
		defer close(written)
		_, _ = stdin.Write(pdf)
		_ = stdin.Close()
	}()
	werr := cmd.Wait()
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-written
	if out.Over() {
		return nil, fmt.Errorf("%w (PNG over %d bytes)", ErrTooCostly, r.cfg.MaxPNG)
	}
	if werr != nil {
		return nil, exitError(werr, stderr.Bytes())
	}
	return out.Bytes(), nil
}

// command is pdftoppm's command for one page at width pixels, reading
// the PDF from stdin, in a process group of its own (killed whole when
// ctx ends) and, when isolate is set, in new user and network
// namespaces.
func (r *Rasterizer) command(ctx context.Context, work string, page, width int, isolate bool) *exec.Cmd {
	p := strconv.Itoa(page)
	// The crop box (-W, -H) bounds the bitmap pdftoppm allocates: poppler
	// draws only the slice asked for, so a very tall page costs its first
	// MaxPixels, not its whole height.
	height := max(r.cfg.MaxPixels/width, 1)
	cmd := exec.CommandContext(ctx, r.bin, "-f", p, "-l", p, "-png", "-singlefile",
		"-scale-to-x", strconv.Itoa(width), "-scale-to-y", "-1",
		"-x", "0", "-y", "0", "-W", strconv.Itoa(width), "-H", strconv.Itoa(height), "-")
	cmd.Env = []string{}
	cmd.Dir = work
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if isolate {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// namespaceRefused reports whether a start that asked for namespaces
// failed because the kernel or the container does not allow them.
func namespaceRefused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES)
}

// bound sets the started process's rlimits (memory, CPU time from the
// timeout, file size, no core, few files) and lowers its priority to
// Nice, below TeX's.
func (r *Rasterizer) bound(pid int) error {
	cpu := max(uint64(r.cfg.Timeout/time.Second), 1)
	if err := childproc.Lower(pid,
		childproc.Limit{Resource: unix.RLIMIT_AS, Cur: r.cfg.Memory, Max: r.cfg.Memory},
		childproc.Limit{Resource: unix.RLIMIT_CPU, Cur: cpu, Max: cpu + 1},
		childproc.Limit{Resource: unix.RLIMIT_FSIZE, Cur: fileSizeLimit, Max: fileSizeLimit},
		childproc.Limit{Resource: unix.RLIMIT_CORE},
		childproc.Limit{Resource: unix.RLIMIT_NOFILE, Cur: openFilesLimit, Max: openFilesLimit},
	); err != nil {
		return fmt.Errorf("rlimits: %w", err)
	}
	return childproc.DeprioritizeTo(pid, Nice)
}

// exitError is the error of a pdftoppm that failed: killed by a signal
// (its rlimits: the page costs too much), or exited with an error it
// wrote to stderr.
func exitError(werr error, stderr []byte) error {
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Errorf("%w (pdftoppm: %s)", ErrTooCostly, ws.Signal())
		}
	}
	return fmt.Errorf("pdftoppm: %w: %s", werr, bytes.TrimSpace(stderr))
}
