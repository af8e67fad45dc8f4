package markdown

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// stopAfter is a context that reports itself cancelled once Err was asked
// n times: the writer asks before every block, so the conversion must stop
// right after n blocks, whatever the machine's speed.
type stopAfter struct {
	context.Context
	n     int64
	calls atomic.Int64
}

func (c *stopAfter) Err() error {
	if c.calls.Add(1) > c.n {
		return context.Canceled
	}
	return nil
}

// TestLaTeXContextStops: the conversion stops at the first block after its
// context ends (issue 10: distinct code languages kept a slot 144 s after
// the client left) and returns the context's error; with a live context
// the same document converts whole.
func TestLaTeXContextStops(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "```lang%d\nx = %d\n```\n\n", i, i)
	}
	d, err := Parse([]byte(b.String()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := &stopAfter{Context: context.Background(), n: 10}
	out, err := d.LaTeXContext(ctx, Meta{Title: "t"}, nil)
	if !errors.Is(err, context.Canceled) || out != nil {
		t.Errorf("LaTeXContext(stopped after 10 blocks) = %v, %v; want context.Canceled", out != nil, err)
	}
	// A block or two may start before the check that stops: no more.
	if n := ctx.calls.Load(); n > 12 {
		t.Errorf("the writer asked its context %d times, want it to stop at the 11th", n)
	}

	pre, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.LaTeXContext(pre, Meta{Title: "t"}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("LaTeXContext(cancelled) = %v, want context.Canceled", err)
	}

	live, stop := context.WithTimeout(context.Background(), time.Hour)
	defer stop()
	out, err = d.LaTeXContext(live, Meta{Title: "t"}, nil)
	if err != nil || !strings.Contains(out.Body, "x = 99") {
		t.Errorf("LaTeXContext(live) = %v, want the whole body", err)
	}
}

// TestLaTeXContextStopsInAnchors: the heading anchors are made before any
// block is written (16,000 identical headings took 19 s there before issue
// 10); the writer asks its context for each of them too.
func TestLaTeXContextStopsInAnchors(t *testing.T) {
	d, err := Parse([]byte(strings.Repeat("# a\n\n", 100)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := &stopAfter{Context: context.Background(), n: 10}
	if _, err := d.LaTeXContext(ctx, Meta{Title: "t"}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("LaTeXContext(stopped after 10 headings) = %v, want context.Canceled", err)
	}
	if n := ctx.calls.Load(); n > 12 {
		t.Errorf("the writer asked its context %d times, want it to stop at the 11th", n)
	}
}
