// Package childproc bounds the helper processes outprint runs on untrusted
// input — rsvg-convert on SVG images, dot and Chromium on diagrams,
// pdftoppm on result pages, qpdf on uploaded forms: their output is read
// into a capped buffer, and their rlimits are lowered and its CPU priority
// lowered (Nice) on the started child before it is sent a byte of input.
// TeX's processes get the same priority (internal/tex). Run is the whole
// set of walls of a converter that reads stdin and writes stdout
// (rsvg-convert, dot: process group, namespaces, rlimits, capped output);
// the others keep their own walls and share the pieces.
package childproc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrOutputTooLarge is the write error of a Capped buffer past its bound.
var ErrOutputTooLarge = errors.New("output too large")

// Capped is a bounded buffer for a child's output. Past Max it keeps
// nothing more and either fails the write (stdout: the copy stops, the
// child gets EPIPE and Over reports it) or, with Truncate, swallows the
// rest (stderr, kept for a message).
type Capped struct {
	Max      int
	Truncate bool
	buf      bytes.Buffer
	over     bool
}

// Write implements io.Writer.
func (c *Capped) Write(p []byte) (int, error) {
	room := c.Max - c.buf.Len()
	if len(p) <= room {
		return c.buf.Write(p)
	}
	c.buf.Write(p[:max(room, 0)])
	c.over = true
	if c.Truncate {
		return len(p), nil
	}
	return 0, ErrOutputTooLarge
}

// Bytes returns what was kept.
func (c *Capped) Bytes() []byte { return c.buf.Bytes() }

// Over reports whether more than Max bytes were written.
func (c *Capped) Over() bool { return c.over }

// Limit is one rlimit: Cur is the soft limit, Max the hard one.
type Limit struct {
	Resource int
	Cur, Max uint64
}

// Lower sets the rlimits of the process pid, each no higher than what the
// child inherited: raising one would need privileges, and a lower inherited
// limit is the operator's choice.
func Lower(pid int, limits ...Limit) error {
	for _, l := range limits {
		var old unix.Rlimit
		if err := unix.Prlimit(pid, l.Resource, nil, &old); err != nil {
			return err
		}
		lim := unix.Rlimit{Cur: min(l.Cur, old.Max), Max: min(l.Max, old.Max)}
		if err := unix.Prlimit(pid, l.Resource, &lim, nil); err != nil {
			return err
		}
	}
	return nil
}

// Nice is the nice value of every process that works on untrusted input:
// TeX (warm processes, zygotes and their children, xdvipdfmx) and the
// helpers. The server's own goroutines run at the nice value outprint was
// started with (0 usually), so when TeX keeps every core busy the kernel
// still gives the HTTP server the CPU at once: /healthz, refusals and
// admission stay fast under hostile load. A nice value only weighs
// processes that compete for a CPU; on an otherwise idle machine TeX gets
// as much CPU as before.
const Nice = 10

// Deprioritize sets the nice value of the process pid to Nice, or leaves
// it where it is when it is already higher (an operator who started
// outprint itself at nice 15: lowering a nice value needs privileges). A
// child inherits the value across fork and exec, so the processes it
// starts (TeX's xdvipdfmx, a zygote's children) run at it too. The error
// is never to be ignored but for ESRCH (the process is gone already).
func Deprioritize(pid int) error { return DeprioritizeTo(pid, Nice) }

// DeprioritizeTo is Deprioritize to the nice value nice, for work below
// TeX's priority (page previews run at raster.Nice, 15): the kernel then
// gives a processor TeX and a preview both want to TeX first.
func DeprioritizeTo(pid, nice int) error {
	// The raw getpriority(2) answers 20 - nice (1 to 40).
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, pid)
	if err != nil {
		return fmt.Errorf("read priority: %w", err)
	}
	if 20-prio >= nice {
		return nil
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, pid, nice); err != nil {
		return fmt.Errorf("lower priority: %w", err)
	}
	// Read back what the kernel shows (a seccomp profile could make the
	// call a no-op that succeeds).
	got, err := NiceOf(pid)
	if err != nil {
		return err
	}
	if got < nice {
		return fmt.Errorf("lower priority: nice is %d after setting %d", got, nice)
	}
	return nil
}

// NiceOf returns the nice value of the process pid, field 19 of
// /proc/PID/stat.
func NiceOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("read nice: %w", unix.ESRCH)
		}
		return 0, fmt.Errorf("read nice: %w", err)
	}
	// The command name is in parentheses and may hold spaces: fields
	// count from after its closing one (state is field 3, nice 19).
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 17 {
		return 0, fmt.Errorf("read nice: short /proc/%d/stat", pid)
	}
	n, err := strconv.Atoi(f[16])
	if err != nil {
		return 0, fmt.Errorf("read nice: %w", err)
	}
	return n, nil
}
