// Package diagram draws the diagrams of a document — Mermaid and Graphviz
// fences — into PDF bytes whose labels are text, for TeX to include as
// graphics.
//
// Mermaid runs where it was made to run: in a browser, which measures the
// labels with a real layout engine. The browser is Debian's Chromium,
// headless, driven over the DevTools protocol through a pipe (chromedp),
// never a shell; the SVGs Mermaid draws for a document are printed by
// Chromium's own PDF printer as one PDF, each on a page the size of its
// diagram, so labels stay text (HTML labels in <foreignObject> too, which
// the SVG converters drop). Chromium processes are kept warm in a pool
// (pool.go) like TeX's, each in its own process group, sandbox and profile
// folder, each with one page that keeps Mermaid loaded and is reset
// between documents (page.go). Graphviz runs as
// Debian's dot in a sandboxed process of its own per diagram (dot.go).
//
// The bounds are those of SPEC §3's diagram rows: MaxDiagrams per document,
// MaxSourceBytes per diagram, Timeout per diagram, MaxPixels of drawing
// area. A diagram that cannot be drawn is a *limits.Error problem naming the
// fence's first line, with the renderer's own message mapped to the
// document's line. The same source drawn again within a process is taken
// from a small memory cache; nothing is kept on disk between requests.
package diagram

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
)

// Kind is the language of a diagram.
type Kind string

// The kinds a fence's info string selects (KindOf).
const (
	Mermaid  Kind = "mermaid"
	Graphviz Kind = "graphviz"
)

// KindOf returns the kind of diagram a fenced block's language (the first
// word of its info string) asks for: "mermaid" and "mermaidjs" (Outline
// writes both) are Mermaid, "dot" and "graphviz" are Graphviz.
func KindOf(lang string) (Kind, bool) {
	switch lang {
	case "mermaid", "mermaidjs":
		return Mermaid, true
	case "dot", "graphviz":
		return Graphviz, true
	}
	return "", false
}

// Bounds of one document's diagrams (SPEC §3). Like the image bounds they
// are not configurable.
const (
	// MaxDiagrams bounds how many diagrams one document may have (422).
	MaxDiagrams = 50
	// MaxSourceBytes bounds the source of one diagram (422).
	MaxSourceBytes = 64 << 10
	// Timeout bounds the drawing of one diagram (413 resource).
	Timeout = 10 * time.Second
	// MaxPixels bounds the drawing area of one diagram, in CSS pixels
	// (1/96 inch) at its natural size (422), like limits.MaxImagePixels.
	MaxPixels = 40_000_000
	// MaxPDFBytes bounds the PDF of one diagram (422), like
	// limits.MaxImageBytes; all of a document's diagrams together count
	// with its images toward limits.MaxTotalImageBytes.
	MaxPDFBytes = limits.MaxImageBytes
)

// Diagram is one fenced block to draw.
type Diagram struct {
	Kind Kind
	// Source is the text between the fences.
	Source string
	// Line is the document line of the opening fence (```mermaid); the
	// source's first line is Line+1. Problems name it.
	Line int
}

// Drawing is a drawn diagram: a page of a PDF and its size in points. The
// Mermaid diagrams of one document drawn together share one PDF, a page
// each (one print for the document, not one per diagram): their PDF
// slices are the same bytes, and such a PDF is to be written once
// (DistinctPDFs).
type Drawing struct {
	PDF []byte
	// Page is the drawing's page of PDF: 1 is the first (0 means 1).
	Page          int
	Width, Height float64
}

// DistinctPDFs returns the PDFs of drs, each shared PDF once, in the order
// of their first drawing, and for each drawing the index of its PDF in
// that list (-1 for a drawing without one).
func DistinctPDFs(drs []Drawing) (pdfs [][]byte, index []int) {
	seen := map[*byte]int{}
	index = make([]int, len(drs))
	for i, dr := range drs {
		if len(dr.PDF) == 0 {
			index[i] = -1
			continue
		}
		k, ok := seen[&dr.PDF[0]]
		if !ok {
			k = len(pdfs)
			seen[&dr.PDF[0]] = k
			pdfs = append(pdfs, dr.PDF)
		}
		index[i] = k
	}
	return pdfs, index
}

// DefaultMermaidDir is where scripts/mermaid.sh (called by setup.sh) and the
// Dockerfile install Mermaid's browser bundle: the npm package mermaid
// 11.16.1, the version Outline's editor pins, MIT licence.
const DefaultMermaidDir = "/usr/local/share/outprint/mermaid/mermaid-11.16.1"

// MermaidVersion is the version of the bundle in DefaultMermaidDir; it is
// part of the cache key.
const MermaidVersion = "11.16.1"

// mermaidSHA256 is the SHA-256 of dist/mermaid.min.js of mermaid 11.16.1, as
// scripts/mermaid.sh checks it: a bundle that differs is not loaded.
const mermaidSHA256 = "18327bef70d96fb505fe7287d9f6a7362ebf07ff6576ddfaffb1a06f3e1a2954"

// Defaults of Config.
const (
	// DefaultBrowsers is Config.Browsers when it is 0: one Chromium
	// process, warmed at the first Mermaid diagram. A worker sets it to
	// its render capacity, since every render holds a slot while it draws.
	DefaultBrowsers = 1
	// DefaultPagesPerBrowser is Config.PagesPerBrowser when it is 0: a
	// Chromium process is replaced after this many documents' pages.
	DefaultPagesPerBrowser = 100
	// DefaultIdleTimeout is Config.IdleTimeout when it is 0: a Chromium
	// process nobody used for this long is ended.
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultCacheBytes is Config.CacheBytes when it is 0: the PDFs of
	// diagrams drawn before, kept in memory.
	DefaultCacheBytes = 16 << 20
)

// Config configures a Drawer. The zero value is the documented defaults.
type Config struct {
	// MermaidDir holds mermaid.min.js (default DefaultMermaidDir; "-":
	// no Mermaid, its diagrams are refused as not installed).
	MermaidDir string
	// Chromium is the browser binary (default: Debian's
	// /usr/lib/chromium/chromium, found through the chromium on PATH;
	// never the shell script wrapper).
	Chromium string
	// Dot is Graphviz's dot (default: dot on PATH).
	Dot string
	// TempDir holds the browsers' profile folders and dot's working
	// folders, each removed with its process (default os.TempDir(); the
	// service gives its data folder's scratch space, since the image's
	// /tmp is read-only).
	TempDir string
	// Browsers is how many Chromium processes may run at once (default
	// DefaultBrowsers).
	Browsers int
	// PagesPerBrowser is how many documents a Chromium process draws
	// before it is replaced (default DefaultPagesPerBrowser).
	PagesPerBrowser int
	// IdleTimeout ends a Chromium process unused this long (default
	// DefaultIdleTimeout).
	IdleTimeout time.Duration
	// CacheBytes bounds the memory cache of drawn diagrams (default
	// DefaultCacheBytes; negative: no cache).
	CacheBytes int64
	// Observer is told what was drawn and which browsers ended, for
	// metrics (default: none).
	Observer Observer

	// The bounds below are the package's constants; tests lower them to
	// reach a bound quickly. They are not settings.
	timeout time.Duration
	// isolate asks for new user and network namespaces for the helper
	// processes where the kernel allows them (on unless a test turns it
	// off to prove the other walls).
	noIsolate bool
}

// WithDefaults returns the config with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MermaidDir == "" {
		c.MermaidDir = DefaultMermaidDir
	}
	if c.Browsers == 0 {
		c.Browsers = DefaultBrowsers
	}
	if c.PagesPerBrowser == 0 {
		c.PagesPerBrowser = DefaultPagesPerBrowser
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultCacheBytes
	}
	if c.timeout == 0 {
		c.timeout = Timeout
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Browsers < 0:
		return fmt.Errorf("diagrams.browsers: %d is negative", c.Browsers)
	case c.PagesPerBrowser < 0:
		return fmt.Errorf("diagrams.pages_per_browser: %d is negative", c.PagesPerBrowser)
	case c.IdleTimeout < 0:
		return fmt.Errorf("diagrams.idle_timeout: %s is negative", c.IdleTimeout)
	}
	return nil
}

// Drawer draws diagrams. It starts no process until a document has a
// diagram that needs one. It is safe for concurrent use.
type Drawer struct {
	cfg     Config
	mermaid *mermaidSetup // nil: Mermaid is not available (see avail)
	dot     string        // "": Graphviz is not available
	avail   Availability
	cache   *cache
	pool    *pool

	closeOnce sync.Once
}

// Availability says which diagram languages this server can draw, and why
// not: `outprint config check` and the startup log show it.
type Availability struct {
	Mermaid, Graphviz bool
	// MermaidReason and GraphvizReason say what is missing.
	MermaidReason, GraphvizReason string
}

// New returns a Drawer. A missing Chromium, Mermaid bundle or dot is not
// an error: Availability says so, and such diagrams are refused with
// ErrNotInstalled's problem.
func New(cfg Config) (*Drawer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Drawer{cfg: cfg}
	if cfg.CacheBytes > 0 {
		d.cache = newCache(cfg.CacheBytes)
	}
	ms, err := loadMermaid(cfg)
	if err != nil {
		d.avail.MermaidReason = err.Error()
	} else {
		d.mermaid = ms
		d.avail.Mermaid = true
		d.pool = newPool(poolConfig{
			chromium: ms.chromium, max: cfg.Browsers, pagesPerBrowser: cfg.PagesPerBrowser,
			idle: cfg.IdleTimeout, isolate: !cfg.noIsolate, script: ms.script, tempDir: cfg.TempDir,
			observer: cfg.Observer,
		})
	}
	if dot, err := findDot(cfg.Dot); err != nil {
		d.avail.GraphvizReason = err.Error()
	} else {
		d.dot = dot
		d.avail.Graphviz = true
	}
	return d, nil
}

// Available says which diagram languages can be drawn.
func (d *Drawer) Available() Availability { return d.avail }

// Close ends every Chromium process and waits for them. Draw fails after
// it.
func (d *Drawer) Close() error {
	d.closeOnce.Do(func() {
		if d.pool != nil {
			d.pool.close()
		}
	})
	return nil
}

// Ready says whether the drawer can draw what it says it can (Available):
// nil, or why not — the last Chromium process it started failed to start
// or to prepare Mermaid, and none has started since (it then tries again
// in the background). It starts no browser otherwise: a drawer that drew
// no Mermaid diagram yet is ready. A language that is not installed does
// not make it unready; its diagrams are refused (422) and the startup log
// said so.
func (d *Drawer) Ready(ctx context.Context) error {
	if d.pool == nil {
		return nil
	}
	return d.pool.ready()
}

// Stats returns the pool's counters (zero without Mermaid).
func (d *Drawer) Stats() Stats {
	if d.pool == nil {
		return Stats{}
	}
	return d.pool.stats()
}

// Draw draws a document's diagrams, in order. Every problem of every
// diagram is collected into one *limits.Error (KindDocument, or
// KindTooLarge when only resource bounds failed): a diagram that cannot be
// parsed names the fence's first line and the renderer's message at the
// document's line. Other errors are internal (a browser that cannot start,
// ctx done).
func (d *Drawer) Draw(ctx context.Context, ds []Diagram) (_ []Drawing, err error) {
	if len(ds) > MaxDiagrams {
		return nil, limits.Invalid(limits.Problem{
			Field: field, Source: limits.SourceDocument, Code: limits.CodeInvalid, Line: ds[MaxDiagrams].Line,
			Message: fmt.Sprintf("the document has %d diagrams, at most %d", len(ds), MaxDiagrams),
		})
	}
	out := make([]Drawing, len(ds))
	var probs problems
	var mermaidTodo []int
	cached := make([]bool, len(ds))
	total := 0
	var dotTime time.Duration
	defer func() { d.observe(ds, out, cached, &probs, err) }()
	for i, dg := range ds {
		if p, ok := d.check(dg); !ok {
			probs.add(i, p)
			continue
		}
		if dr, ok := d.cache.get(key(dg)); ok {
			out[i] = dr
			cached[i] = true
			continue
		}
		switch dg.Kind {
		case Mermaid:
			mermaidTodo = append(mermaidTodo, i)
		case Graphviz:
			start := time.Now()
			dr, err := d.drawDot(ctx, dg)
			dotTime += time.Since(start)
			if err != nil {
				var p *problem
				if !errors.As(err, &p) {
					return nil, err
				}
				probs.add(i, p)
				continue
			}
			d.cache.put(key(dg), dr)
			out[i] = dr
		}
	}
	if dotTime > 0 {
		d.cfg.Observer.ObserveDiagramDraw(EngineGraphviz, dotTime)
	}
	if len(mermaidTodo) > 0 {
		start := time.Now()
		err := d.drawMermaid(ctx, ds, mermaidTodo, out, &probs)
		d.cfg.Observer.ObserveDiagramDraw(EngineMermaid, time.Since(start))
		if err != nil {
			return nil, err
		}
	}
	pdfs, _ := DistinctPDFs(out)
	for _, pdf := range pdfs {
		total += len(pdf)
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	if total > limits.MaxTotalImageBytes {
		return nil, limits.Invalid(limits.Problem{
			Field: field, Source: limits.SourceDocument, Code: limits.CodeInvalid,
			Message: fmt.Sprintf("the document's diagrams draw %d bytes of PDF, more than the %d bytes of graphics a document may have", total, limits.MaxTotalImageBytes),
		})
	}
	return out, nil
}

// observe tells the Observer each diagram's outcome of a Draw that got
// past the count: its problem, drawn or cached, else an error of the
// server or the request (err, the Draw's).
func (d *Drawer) observe(ds []Diagram, out []Drawing, cached []bool, probs *problems, err error) {
	for i, dg := range ds {
		outcome := probs.outcome(i)
		switch {
		case outcome != "":
		case cached[i]:
			outcome = OutcomeCached
		case len(out[i].PDF) > 0:
			outcome = OutcomeDrawn
		case err != nil:
			outcome = OutcomeError
		default:
			continue
		}
		d.cfg.Observer.DiagramDrawn(string(dg.Kind), outcome)
	}
}

// check refuses a diagram before anything is started for it: a language
// this server cannot draw, a source over MaxSourceBytes.
func (d *Drawer) check(dg Diagram) (*problem, bool) {
	switch {
	case dg.Kind == Mermaid && d.mermaid == nil, dg.Kind == Graphviz && d.dot == "":
		return notInstalled(dg), false
	case dg.Kind != Mermaid && dg.Kind != Graphviz:
		return invalid(dg, 0, fmt.Sprintf("%q is not a diagram language", dg.Kind)), false
	case len(dg.Source) > MaxSourceBytes:
		return invalid(dg, 0, fmt.Sprintf("its source has %d bytes, at most %d (64 KiB)", len(dg.Source), MaxSourceBytes)), false
	}
	return nil, true
}

// drawMermaid draws the Mermaid diagrams ds[todo...] in one page of a warm
// browser, no other document's diagram in it meanwhile: first all
// together, printed as one PDF (drawBatch); what that could not draw
// (its page broke, the PDF was too large) one by one (drawEach), each
// bound then met by its own diagram.
func (d *Drawer) drawMermaid(ctx context.Context, ds []Diagram, todo []int, out []Drawing, probs *problems) error {
	pg, err := d.pool.acquire(ctx)
	if err != nil {
		return fmt.Errorf("diagrams: %w", err)
	}
	// retried: the diagrams whose page broke under them once (not on a
	// bound of theirs); a second time is theirs.
	retried := map[int]bool{}
	rest, broken, err := d.drawBatch(ctx, pg, ds, todo, out, probs, retried)
	if err != nil || broken {
		d.pool.release(pg, true)
		if err != nil {
			return err
		}
		if len(rest) == 0 {
			return nil
		}
		if pg, err = d.pool.acquire(ctx); err != nil {
			return fmt.Errorf("diagrams: %w", err)
		}
	}
	return d.drawEach(ctx, pg, ds, rest, out, probs, retried)
}

// drawBatch draws the diagrams ds[todo...] into pages of pg and prints
// them as one PDF. It returns the diagrams left to draw one by one, and
// whether pg is broken (its browser must go); err is ctx's end.
func (d *Drawer) drawBatch(ctx context.Context, pg *page, ds []Diagram, todo []int, out []Drawing, probs *problems, retried map[int]bool) (rest []int, broken bool, err error) {
	var kept []int
	for k, i := range todo {
		_, err := pg.add(ctx, ds[i], d.cfg.timeout)
		if err == nil {
			kept = append(kept, i)
			continue
		}
		var p *problem
		if errors.As(err, &p) {
			probs.add(i, p)
			if !p.broken {
				continue
			}
			// The diagram stopped the page (time, memory): the drawings
			// before it went with it.
			return append(kept, todo[k+1:]...), true, nil
		}
		if ctx.Err() != nil {
			return nil, true, err
		}
		retried[i] = true
		return append(kept, todo[k:]...), true, nil
	}
	if len(kept) == 0 {
		return nil, false, nil
	}
	pdf, err := pg.printPages(ctx, d.cfg.timeout, min(len(kept)*MaxPDFBytes, limits.MaxTotalImageBytes+1))
	switch {
	case ctx.Err() != nil:
		return nil, true, ctx.Err()
	case errors.Is(err, errPDFTooLarge):
		// Which diagram is too large is for drawEach to find.
		return kept, false, nil
	case err != nil:
		return kept, true, nil
	}
	// One page per diagram, or the pages are not the diagrams (a drawing
	// that spilled onto a second page): then one by one.
	sizes, err := images.PageSizes(pdf, len(kept)+1)
	if err != nil || len(sizes) != len(kept) {
		return kept, false, nil
	}
	for j, i := range kept {
		dr := Drawing{PDF: pdf, Page: j + 1, Width: sizes[j][0], Height: sizes[j][1]}
		d.cache.put(key(ds[i]), dr)
		out[i] = dr
	}
	return nil, false, nil
}

// drawEach draws the Mermaid diagrams ds[todo...] one at a time, each
// printed alone, starting in page pg, which it releases.
func (d *Drawer) drawEach(ctx context.Context, pg *page, ds []Diagram, todo []int, out []Drawing, probs *problems, retried map[int]bool) error {
	broken := false
	defer func() { d.pool.release(pg, broken) }()
	for k := 0; k < len(todo); k++ {
		i := todo[k]
		dg := ds[i]
		dr, err := pg.draw(ctx, dg, d.cfg.timeout)
		if err != nil {
			var p *problem
			if !errors.As(err, &p) {
				// The page broke, not on a bound of the diagram: its
				// browser died under it (killed from outside, out of
				// memory) or the connection failed. The diagram gets one
				// more page; a diagram that breaks that one too is the
				// diagram's problem.
				if ctx.Err() != nil {
					broken = true
					return err
				}
				d.pool.release(pg, true)
				if pg, err = d.pool.acquire(ctx); err != nil {
					pg = nil
					return fmt.Errorf("diagrams: %w", err)
				}
				if retried[i] {
					probs.add(i, resource(dg, "it stopped the browser drawing it", true))
					continue
				}
				retried[i] = true
				k--
				continue
			}
			probs.add(i, p)
			if p.broken {
				// The page was stopped (time, memory): its browser is
				// ended, and the rest of the document's diagrams get a
				// new page.
				broken = true
				d.pool.release(pg, true)
				if pg, err = d.pool.acquire(ctx); err != nil {
					pg = nil
					return fmt.Errorf("diagrams: %w", err)
				}
				broken = false
			}
			continue
		}
		d.cache.put(key(dg), dr)
		out[i] = dr
	}
	return nil
}

// findChromium returns the browser binary: path when set, else the real
// binary behind Debian's chromium wrapper script (/usr/lib/chromium/
// chromium), else chromium or chromium-browser on PATH when it is not a
// script.
func findChromium(path string) (string, error) {
	if path != "" {
		return exec.LookPath(path)
	}
	if fi, err := os.Stat("/usr/lib/chromium/chromium"); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return "/usr/lib/chromium/chromium", nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if isScript(p) {
			continue
		}
		return p, nil
	}
	return "", errors.New("chromium is not installed")
}

// isScript reports whether the file starts with "#!".
func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	var b [2]byte
	n, _ := f.Read(b[:])
	return n == 2 && string(b[:]) == "#!"
}

// findDot returns Graphviz's dot.
func findDot(path string) (string, error) {
	if path == "" {
		path = "dot"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", errors.New("graphviz (dot) is not installed")
	}
	return p, nil
}

// Check refuses, without starting anything, what Draw would refuse before
// drawing: more than MaxDiagrams diagrams, a language this server cannot
// draw (not installed), a source over MaxSourceBytes. Its error lists every
// such problem (*limits.Error, KindDocument); the render's cheap checks
// call it so that they come back with the document's other problems.
func (d *Drawer) Check(ds []Diagram) error {
	if len(ds) > MaxDiagrams {
		return limits.Invalid(limits.Problem{
			Field: field, Source: limits.SourceDocument, Code: limits.CodeInvalid, Line: ds[MaxDiagrams].Line,
			Message: fmt.Sprintf("the document has %d diagrams, at most %d", len(ds), MaxDiagrams),
		})
	}
	var probs problems
	for i, dg := range ds {
		if p, ok := d.check(dg); !ok {
			probs.add(i, p)
		}
	}
	return probs.err()
}

// DefaultEnabled is whether diagrams are drawn when the configuration says
// nothing (diagrams.enabled): yes, and a server without Chromium, the
// Mermaid bundle or dot answers such a diagram with a problem saying so,
// rather than printing its source as if that were the document.
const DefaultEnabled = true

// String says what the server can draw, for the startup log and `outprint
// config check`.
func (a Availability) String() string {
	switch {
	case a.Mermaid && a.Graphviz:
		return "Mermaid and Graphviz"
	case a.Mermaid:
		return "Mermaid; Graphviz is not: " + a.GraphvizReason
	case a.Graphviz:
		return "Graphviz; Mermaid is not: " + a.MermaidReason
	}
	return "none: " + a.MermaidReason + "; " + a.GraphvizReason
}
