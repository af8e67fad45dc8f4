// Package childproc bounds the helper processes outprint runs on untrusted
// input — rsvg-convert on SVG images, pdftoppm on result pages, qpdf on
// uploaded forms: their output is read into a capped buffer, and their
// rlimits are lowered on the started child before it is sent a byte of
// input. Each caller keeps its own walls (environment, folder, process
// group, namespaces); this package holds the two pieces they all share.
package childproc

import (
	"bytes"
	"errors"

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
