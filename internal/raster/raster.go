// Package raster draws pages of a PDF as PNG images, for the thumbnails of
// a job's result (GET /v1/jobs/{id}/pages/{n}.png). The PDF is one outprint
// made, but a page may still be expensive to draw (a huge image, a deep
// vector drawing), and poppler is a large C library: it runs as
// `pdftoppm` in its own process with the walls of TeX and rsvg-convert —
// an empty environment and folder, its own process group killed as a
// whole, new user and network namespaces where the kernel allows them, and
// rlimits on memory, CPU, file size and open files set before it is sent a
// byte. A drawing that needs more is refused, never waited for.
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
)

// Defaults of a Rasterizer (see Config).
const (
	DefaultTimeout  = 10 * time.Second
	DefaultMemory   = 1 << 30 // RLIMIT_AS, the memory limit of a TeX process
	DefaultMaxPNG   = 8 << 20
	MinWidth        = 16
	MaxWidth        = 2000
	fileSizeLimit   = 16 << 20
	openFilesLimit  = 256
	stderrKeepBytes = 2 << 10
)

// Config bounds a Rasterizer. Zero values take the defaults above.
type Config struct {
	// Timeout bounds one drawing in wall-clock time; the CPU limit is the
	// same number of seconds.
	Timeout time.Duration
	// Memory is the address-space limit of the process in bytes.
	Memory uint64
	// MaxPNG bounds the PNG read back; a larger one is an error.
	MaxPNG int
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
	bin, err := exec.LookPath("pdftoppm")
	if err != nil {
		return nil, fmt.Errorf("raster: %w (install poppler-utils)", err)
	}
	return &Rasterizer{cfg: cfg.WithDefaults(), bin: bin}, nil
}

// ErrTooCostly is a page that needs more time, memory or output than the
// bounds allow.
var ErrTooCostly = errors.New("the page is too costly to draw")

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
	work, err := os.MkdirTemp("", "outprint-raster-")
	if err != nil {
		return nil, fmt.Errorf("raster: %w", err)
	}
	defer os.RemoveAll(work)
	tctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	out, err := r.run(tctx, work, pdf, page, width, true)
	if errors.Is(err, errNoNamespaces) {
		out, err = r.run(tctx, work, pdf, page, width, false)
	}
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("raster page %d: %w", page, ctx.Err())
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		return nil, fmt.Errorf("raster page %d: %w (took longer than %s)", page, ErrTooCostly, r.cfg.Timeout)
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
	p := strconv.Itoa(page)
	cmd := exec.CommandContext(ctx, r.bin, "-f", p, "-l", p, "-png", "-singlefile",
		"-scale-to-x", strconv.Itoa(width), "-scale-to-y", "-1", "-")
	cmd.Env = []string{}
	cmd.Dir = work
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if isolate {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out := &childproc.Capped{Max: r.cfg.MaxPNG}
	stderr := &childproc.Capped{Max: stderrKeepBytes, Truncate: true}
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Start(); err != nil {
		stdin.Close()
		if isolate && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
			errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES)) {
			return nil, errNoNamespaces
		}
		return nil, fmt.Errorf("start %s: %w", r.bin, err)
	}
	pid := cmd.Process.Pid
	cpu := max(uint64(r.cfg.Timeout/time.Second), 1)
	if err := childproc.Lower(pid,
		childproc.Limit{Resource: unix.RLIMIT_AS, Cur: r.cfg.Memory, Max: r.cfg.Memory},
		childproc.Limit{Resource: unix.RLIMIT_CPU, Cur: cpu, Max: cpu + 1},
		childproc.Limit{Resource: unix.RLIMIT_FSIZE, Cur: fileSizeLimit, Max: fileSizeLimit},
		childproc.Limit{Resource: unix.RLIMIT_CORE},
		childproc.Limit{Resource: unix.RLIMIT_NOFILE, Cur: openFilesLimit, Max: openFilesLimit},
	); err != nil {
		syscall.Kill(-pid, syscall.SIGKILL)
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("rlimits: %w", err)
	}
	if err := childproc.Deprioritize(pid); err != nil {
		syscall.Kill(-pid, syscall.SIGKILL)
		stdin.Close()
		cmd.Wait()
		return nil, err
	}
	// Owned by run: it ends when the PDF is written or the pipe closes
	// after the process exited; run waits for it.
	written := make(chan struct{})
	go func() {
		defer close(written)
		stdin.Write(pdf)
		stdin.Close()
	}()
	werr := cmd.Wait()
	syscall.Kill(-pid, syscall.SIGKILL)
	<-written
	if out.Over() {
		return nil, fmt.Errorf("%w (PNG over %d bytes)", ErrTooCostly, r.cfg.MaxPNG)
	}
	if werr != nil {
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return nil, fmt.Errorf("%w (pdftoppm: %s)", ErrTooCostly, ws.Signal())
			}
		}
		return nil, fmt.Errorf("pdftoppm: %w: %s", werr, bytes.TrimSpace(stderr.Bytes()))
	}
	return out.Bytes(), nil
}
