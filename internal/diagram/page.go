package diagram

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/inspector"
	cdpio "github.com/chromedp/cdproto/io"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

//go:embed page.js
var pageScript string

// pageHTML is the document each page starts from: a data: URL (an opaque
// origin, so no storage is shared with any other page) whose
// Content-Security-Policy lets nothing load — no script, image, font,
// style sheet or connection — and allows only the inline styles Mermaid's
// SVG carries. outprint's own scripts reach the page through DevTools
// (Runtime.evaluate), which the policy does not govern.
const pageHTML = `<!doctype html><html><head><meta charset="utf-8">` +
	`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'">` +
	`<style>html,body{margin:0;padding:0;background:transparent}#d,.op-page{margin:0;padding:0}` +
	// Chromium's printer rasterizes what an SVG filter (a drop shadow)
	// applies to, labels with it: no filters.
	`#d svg, #d svg *, .op-page svg, .op-page svg *{filter:none!important}` +
	// Nothing can load (the policy), so an <img> of a label would print
	// as Chromium's broken-image icon: hidden, with its kin.
	`:is(#d,.op-page) :is(img, picture, video, audio, iframe, object, embed, input){display:none!important}</style>` +
	`</head><body><div id="d"></div></body></html>`

// pageURL is pageHTML as a URL to navigate to.
var pageURL = "data:text/html;charset=utf-8;base64," + base64.StdEncoding.EncodeToString([]byte(pageHTML))

// page is a prepared tab in a browser context of its own, with Mermaid
// loaded and set up (and, after its first document, its code compiled:
// warm). It lives as long as its
// browser and serves one document after another: loading and compiling
// Mermaid's 3.5 MB again for each document cost more than drawing its
// diagrams. Documents stay apart because nothing of one outlives it in
// the page: the pool resets the page to its set-up state (page.js: the
// whole DOM rebuilt, Mermaid initialised again) when a document gives it
// back, so an idle page holds nothing of the last document, and Mermaid
// is initialised again before each diagram, so one diagram's %%{init}%%
// cannot reach the next. A diagram cannot run script (strict security
// level, the CSP) nor load anything, so the DOM is all a later diagram
// could see; the page's browser context is never shared with another
// page.
type page struct {
	b      *browser
	ctx    context.Context // the tab's chromedp context, owned by the page
	cancel context.CancelFunc
	target *chromedp.Target

	// refused counts the requests the page tried and interception
	// refused (none for a well-behaved diagram; tests read it).
	refused *atomic.Int64
	// crashed is set when the renderer crashed; crash is then done, and
	// stops the diagram being drawn.
	crashed   atomic.Bool
	crash     context.Context
	crashDone context.CancelFunc
	// watchers are the page's two event goroutines (interception, crash).
	watchers sync.WaitGroup
	// warmed: warm ran (only the pool's goroutine that gives the page
	// back reads and sets it, one at a time).
	warmed bool
}

// preparePage opens a tab in a new browser context of b, refuses every
// request the tab makes, loads the page and Mermaid, and sets Mermaid up.
// ctx bounds the preparation only.
func preparePage(ctx context.Context, b *browser, script string, refused *atomic.Int64) (*page, error) {
	// The tab lives under a context of its own whose cause says why a
	// preparation was cut short: "context canceled" alone, under load,
	// did not tell a slow machine from a pool closing or a dead browser.
	pctx, pcancel := context.WithCancelCause(b.root)
	tctx, cancel := chromedp.NewContext(pctx, chromedp.WithNewBrowserContext())
	p := &page{b: b, ctx: tctx, cancel: func() { cancel(); pcancel(nil) }, refused: refused}
	p.crash, p.crashDone = context.WithCancel(context.Background())
	// chromedp binds the tab's session to the context of its first call,
	// so that is tctx itself; the preparation is bounded by closing the
	// tab, which ends the call: past browserStart, or when ctx is done.
	timer := time.AfterFunc(browserStart, func() { pcancel(errPrepareTimeout) })
	defer timer.Stop()
	stop := context.AfterFunc(ctx, func() { pcancel(fmt.Errorf("pool closing: %w", context.Cause(ctx))) })
	defer stop()
	err := chromedp.Do(tctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		p.target = t
		p.watch(t)
		// Every request of the page is paused for us, and refused.
		if _, err := cdp.Call(ctx, t, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}}); err != nil {
			return fmt.Errorf("request interception: %w", err)
		}
		return nil
	}), chromedp.Navigate(pageURL), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, src := range []string{script, pageScript} {
			res, err := cdp.Call(ctx, t, runtime.Evaluate, runtime.EvaluateParams{Expression: src, Silent: ptr(true)})
			if err != nil {
				return err
			}
			if res.ExceptionDetails != nil {
				return fmt.Errorf("set up the page: %s", exceptionText(res.ExceptionDetails))
			}
		}
		return nil
	}))
	if err != nil {
		cause := context.Cause(pctx)
		p.close()
		switch {
		case cause != nil:
			return nil, fmt.Errorf("prepare a page: %w (%v)", cause, err)
		case !b.alive():
			return nil, fmt.Errorf("prepare a page: the browser exited (%s): %w", b.stderrTail(), err)
		}
		return nil, fmt.Errorf("prepare a page: %w", err)
	}
	return p, nil
}

// watch starts the page's event goroutines: one refuses every request the
// tab makes (Fetch.requestPaused → failRequest), one notes a renderer
// crash. Both are owned by the page and end when its context does (close).
func (p *page) watch(t *chromedp.Target) {
	paused := cdp.Events(p.ctx, t, fetch.RequestPaused)
	crashes := cdp.Events(p.ctx, t, inspector.TargetCrashed)
	p.watchers.Add(2)
	go func() {
		defer p.watchers.Done()
		for ev, err := range paused {
			if err != nil {
				return
			}
			p.refused.Add(1)
			cctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
			// Best effort: a paused request never reaches the network either way.
			_, _ = cdp.Call(cctx, t, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
			cancel()
		}
	}()
	go func() {
		defer p.watchers.Done()
		for _, err := range crashes {
			if err == nil {
				p.crashed.Store(true)
				p.crashDone()
			}
			return
		}
	}()
}

// warmDiagrams are drawn once in a page, after its first document (the
// first document of a new browser is not kept waiting for them), off any
// render's path: V8 compiles Mermaid's code for each diagram type as it first runs
// it, and Chromium's printer sets itself up at its first PDF, which made
// a document's first diagrams several times slower than later ones. The
// commonest types only: each costs the browser's start some CPU.
var warmDiagrams = []string{
	"flowchart LR\n  A[Start] --> B{Check}\n  B -->|yes| C([End])",
	"sequenceDiagram\n  Alice->>Bob: Hello\n  Bob-->>Alice: Hi",
	"classDiagram\n  class Animal {\n    +String name\n    +move() bool\n  }\n  Animal <|-- Dog",
}

// warm draws and prints warmDiagrams, then resets the page (as reset),
// bounded by ctx and browserStart.
func (p *page) warm(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(p.ctx, browserStart)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	if err := chromedp.Do(wctx, chromedp.Func(p.warmUp)); err != nil {
		return fmt.Errorf("warm the page: %w", err)
	}
	p.warmed = true
	return nil
}

// warmUp draws and prints warmDiagrams in the page t, then resets it.
func (p *page) warmUp(ctx context.Context, t *chromedp.Target) error {
	for i, src := range warmDiagrams {
		res, err := evalDraw(ctx, t, src)
		if err != nil {
			return fmt.Errorf("warm up: %w", err)
		}
		if res.Error != "" {
			return fmt.Errorf("warm up: diagram %d: %s", i, res.Error)
		}
		if i == 0 {
			if _, err := printPDF(ctx, t, res.SW/96, res.SH/96); err != nil {
				return fmt.Errorf("warm up: %w", err)
			}
		}
	}
	_, err := chromedp.Evaluate[bool]("__outprintReset()")(ctx, t)
	return err
}

// reset puts the page back as it was set up (page.js), so that nothing of
// the document drawn in it is left for the next one. ctx and pageReset
// bound it.
func (p *page) reset(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(p.ctx, pageReset)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	if _, err := chromedp.Run(rctx, chromedp.Evaluate[bool]("__outprintReset()")); err != nil {
		return fmt.Errorf("reset the page: %w", err)
	}
	return nil
}

// pageReset bounds resetting a page between documents: a few
// milliseconds on a working page, generous for a machine under load (a
// page whose reset passes it is treated as broken, and its browser
// replaced).
const pageReset = 20 * time.Second

// evalDraw runs __outprintDraw on one diagram's source in the page t.
func evalDraw(ctx context.Context, t *chromedp.Target, source string) (drawResult, error) {
	src, err := json.Marshal(source)
	if err != nil {
		return drawResult{}, err
	}
	return chromedp.Evaluate[drawResult](fmt.Sprintf("__outprintDraw(%s, %d)", src, maxPaperInches*96), chromedp.EvalAwaitPromise)(ctx, t)
}

// close closes the tab and disposes of its browser context (chromedp does
// both when the tab's context is cancelled) and waits for the watchers.
func (p *page) close() {
	p.cancel()
	p.watchers.Wait()
	p.crashDone()
}

// drawResult is __outprintDraw's answer.
type drawResult struct {
	// W, H is the drawing's natural size; SW, SH its size on the page.
	W     float64 `json:"w"`
	H     float64 `json:"h"`
	SW    float64 `json:"sw"`
	SH    float64 `json:"sh"`
	Error string  `json:"error"`
}

// maxPaperInches is the largest page side Chromium's printer writes (PDF's
// own bound is 200 inches); a larger drawing is printed scaled down.
const maxPaperInches = 200

// draw draws one Mermaid diagram in the page and prints it. A problem of
// the diagram is a *problem; other errors are internal (the page is then
// broken). timeout bounds this diagram.
func (p *page) draw(ctx context.Context, dg Diagram, timeout time.Duration) (Drawing, error) {
	dctx, cancel := p.bound(ctx, timeout)
	defer cancel()
	fail := func(err error) (Drawing, error) { return Drawing{}, p.failure(ctx, dctx, dg, timeout, err) }

	res, err := chromedp.Run(dctx, func(ctx context.Context, t *chromedp.Target) (drawResult, error) {
		return evalDraw(ctx, t, dg.Source)
	})
	if err != nil {
		return fail(err)
	}
	if res.Error != "" {
		msg := clean(res.Error)
		return Drawing{}, invalid(dg, mermaidLine(dg.Source, sourceLine(res.Error)), msg)
	}
	if res.W*res.H > MaxPixels {
		return Drawing{}, invalid(dg, 0, fmt.Sprintf("it draws %.0f × %.0f pixels, more than %d million", res.W, res.H, MaxPixels/1_000_000))
	}
	// The page is the drawing's size, scaled down by the page to PDF's
	// 200 inches when a side is longer.
	w, h := res.SW/96, res.SH/96
	pdf, err := chromedp.Run(dctx, func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
		return printPDF(ctx, t, w, h)
	})
	if errors.Is(err, errPDFTooLarge) {
		return Drawing{}, invalid(dg, 0, fmt.Sprintf("its PDF is larger than %d bytes", MaxPDFBytes))
	}
	if err != nil {
		return fail(err)
	}
	return Drawing{PDF: pdf, Width: w * 72, Height: h * 72}, nil
}

// bound returns the context a step of a diagram runs in: the page's,
// ended past timeout (cause errDiagramTimeout), when ctx ends or when the
// renderer crashed.
func (p *page) bound(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithTimeoutCause(p.ctx, timeout, errDiagramTimeout)
	stopReq := context.AfterFunc(ctx, cancel)
	stopCrash := context.AfterFunc(p.crash, cancel)
	return dctx, func() {
		stopReq()
		stopCrash()
		cancel()
	}
}

// failure is the error of a step of dg that failed with err in dctx: the
// diagram's problem when it crashed the renderer or passed its time
// (the page is broken then), else a *brokenPage.
func (p *page) failure(ctx, dctx context.Context, dg Diagram, timeout time.Duration, err error) error {
	switch {
	case p.crashed.Load():
		return resource(dg, "drawing it needs more memory than a diagram may use", true)
	case ctx.Err() != nil:
		return &brokenPage{ctx.Err()}
	case errors.Is(context.Cause(dctx), errDiagramTimeout):
		return resource(dg, fmt.Sprintf("drawing it took longer than %s", timeout), true)
	}
	return &brokenPage{err}
}

// add draws one more diagram of a document as a page of the document's
// PDF (page.js, __outprintAdd), bounded by timeout; printPages prints
// them. Errors are those of draw.
func (p *page) add(ctx context.Context, dg Diagram, timeout time.Duration) (drawResult, error) {
	dctx, cancel := p.bound(ctx, timeout)
	defer cancel()
	res, err := chromedp.Run(dctx, func(ctx context.Context, t *chromedp.Target) (drawResult, error) {
		src, err := json.Marshal(dg.Source)
		if err != nil {
			return drawResult{}, err
		}
		return chromedp.Evaluate[drawResult](fmt.Sprintf("__outprintAdd(%s, %d)", src, maxPaperInches*96), chromedp.EvalAwaitPromise)(ctx, t)
	})
	if err != nil {
		return drawResult{}, p.failure(ctx, dctx, dg, timeout, err)
	}
	if res.Error != "" {
		return drawResult{}, invalid(dg, mermaidLine(dg.Source, sourceLine(res.Error)), clean(res.Error))
	}
	if res.W*res.H > MaxPixels {
		return drawResult{}, invalid(dg, 0, fmt.Sprintf("it draws %.0f × %.0f pixels, more than %d million", res.W, res.H, MaxPixels/1_000_000))
	}
	return res, nil
}

// errPrintTimeout is the cause of printing a document's pages past its
// bound.
var errPrintTimeout = errors.New("print timeout")

// printPages prints the pages add drew, each on paper of its own size,
// as one PDF of at most maxBytes (errPDFTooLarge), within timeout (an
// error whose cause is errPrintTimeout).
func (p *page) printPages(ctx context.Context, timeout time.Duration, maxBytes int) ([]byte, error) {
	pctx, cancel := context.WithTimeoutCause(p.ctx, timeout, errPrintTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	stopCrash := context.AfterFunc(p.crash, cancel)
	defer stopCrash()
	pdf, err := chromedp.Run(pctx, func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
		r, err := cdp.Call(ctx, t, cdppage.PrintToPDF, cdppage.PrintToPDFParams{
			PrintBackground:         ptr(true),
			PreferCSSPageSize:       ptr(true),
			GenerateTaggedPDF:       ptr(false),
			GenerateDocumentOutline: ptr(false),
			TransferMode:            cdppage.PrintToPDFTransferModeReturnAsStream,
		})
		if err != nil {
			return nil, err
		}
		return readStream(ctx, t, r.Stream, maxBytes)
	})
	if err != nil && context.Cause(pctx) != nil && !errors.Is(err, errPDFTooLarge) {
		return nil, fmt.Errorf("print the diagrams: %w (%w)", context.Cause(pctx), err)
	}
	return pdf, err
}

// printPDF prints the page t's first page on paper w × h inches, without
// margins, and returns the PDF (at most MaxPDFBytes: errPDFTooLarge).
func printPDF(ctx context.Context, t *chromedp.Target, w, h float64) ([]byte, error) {
	zero := 0.0
	params := cdppage.PrintToPDFParams{
		PrintBackground:         ptr(true),
		PaperWidth:              w,
		PaperHeight:             h,
		MarginTop:               &zero,
		MarginBottom:            &zero,
		MarginLeft:              &zero,
		MarginRight:             &zero,
		PageRanges:              "1",
		PreferCSSPageSize:       ptr(false),
		GenerateTaggedPDF:       ptr(false),
		GenerateDocumentOutline: ptr(false),
		TransferMode:            cdppage.PrintToPDFTransferModeReturnAsStream,
	}
	r, err := cdp.Call(ctx, t, cdppage.PrintToPDF, params)
	if err != nil {
		return nil, err
	}
	return readStream(ctx, t, r.Stream, MaxPDFBytes)
}

// errPrepareTimeout is the cause of a page preparation past browserStart.
var errPrepareTimeout = fmt.Errorf("preparing the page took longer than %s", browserStart)

// errDiagramTimeout is the cause of a diagram's context past its Timeout.
var errDiagramTimeout = errors.New("diagram timeout")

// errPDFTooLarge: the printed PDF is over its bound.
var errPDFTooLarge = errors.New("pdf too large")

// brokenPage is an internal failure of a page (its browser goes).
type brokenPage struct{ err error }

func (e *brokenPage) Error() string { return "diagram page: " + e.err.Error() }
func (e *brokenPage) Unwrap() error { return e.err }

// readStream reads a stream of the browser up to max bytes, and closes it.
func readStream(ctx context.Context, t *chromedp.Target, h cdpio.StreamHandle, max int) (data []byte, err error) {
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		// Best effort: the data is read, or its error is the one to report.
		_, _ = cdp.Call(cctx, t, cdpio.Close, cdpio.CloseParams{Handle: h})
	}()
	var buf []byte
	for {
		res, err := cdp.Call(ctx, t, cdpio.Read, cdpio.ReadParams{Handle: h, Size: 1 << 20})
		if err != nil {
			return nil, fmt.Errorf("read the PDF: %w", err)
		}
		buf = append(buf, res.Data...)
		if len(buf) > max {
			return nil, errPDFTooLarge
		}
		if res.EOF {
			return buf, nil
		}
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		return d.Exception.Description
	}
	return d.Text
}

func ptr[T any](v T) *T { return &v }
