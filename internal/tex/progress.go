package tex

import (
	"strconv"
	"strings"
	"sync"
)

// lineWatcher reads the harness's lines from TeX's terminal output. Its
// line method runs on the proc's reader goroutine and never blocks.
type lineWatcher struct {
	nonce     string
	startMark string // the line that marks the document's start, if any
	pages     func(int)
	onTOC     func() // the document reads a table of contents
	onStart   func() // called under mu

	mu sync.Mutex
}

func (w *lineWatcher) line(s string) {
	m := marker(w.nonce)
	i := strings.Index(s, m)
	if i < 0 {
		return
	}
	rest := s[i+len(m):]
	switch {
	case strings.HasPrefix(rest, "page "):
		if n, err := strconv.Atoi(strings.TrimSpace(rest[5:])); err == nil && w.pages != nil {
			w.pages(n)
		}
	case strings.HasPrefix(rest, "toc "):
		if w.onTOC != nil {
			w.onTOC()
		}
	case w.startMark != "" && strings.HasPrefix(s[i:], w.startMark):
		if w.onStart != nil {
			w.mu.Lock()
			w.onStart()
			w.mu.Unlock()
		}
	}
}

// reporter hands page counts to a Job's Progress without ever blocking
// the goroutine that reads TeX's output: it keeps only the latest count,
// and a goroutine of its own calls Progress.
type reporter struct {
	ch   chan int
	done chan struct{}
}

// newReporter starts the reporting goroutine when fn is set. The goroutine
// is owned by the render: it ends when close is called (after the last
// report) and fn has returned.
func newReporter(fn func(int)) *reporter {
	if fn == nil {
		return &reporter{}
	}
	r := &reporter{ch: make(chan int, 1), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for n := range r.ch {
			fn(n)
		}
	}()
	return r
}

// report replaces any count not yet delivered with n. It is called from
// one goroutine only.
func (r *reporter) report(n int) {
	if r.ch == nil {
		return
	}
	select {
	case r.ch <- n:
	default:
		select {
		case <-r.ch:
		default:
		}
		select {
		case r.ch <- n:
		default:
		}
	}
}

// close delivers the last count and waits until Progress has returned.
func (r *reporter) close() {
	if r.ch == nil {
		return
	}
	close(r.ch)
	<-r.done
}
