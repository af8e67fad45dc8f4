package diagram

import "time"

// Observer is told what the drawer did, for metrics (package metrics
// implements it). Its methods must be cheap and safe for concurrent use.
type Observer interface {
	// DiagramDrawn is told of each diagram a Draw settled, by engine
	// (EngineMermaid, EngineGraphviz) and outcome (Outcomes).
	DiagramDrawn(engine, outcome string)
	// ObserveDiagramDraw is told how long one document's diagrams of
	// engine took to draw (those the cache did not answer).
	ObserveDiagramDraw(engine string, d time.Duration)
	// BrowserRetired is told of each Chromium process that ended, by
	// cause (RetireCauses); its replacement, if one is needed, starts at
	// once or with the next document.
	BrowserRetired(cause string)
}

// The engine labels.
const (
	EngineMermaid  = "mermaid"
	EngineGraphviz = "graphviz"
)

// Engines are the engine labels, for metrics that exist before the first
// diagram.
var Engines = []string{EngineMermaid, EngineGraphviz}

// The outcomes of a diagram.
const (
	// OutcomeDrawn: drawn by the renderer.
	OutcomeDrawn = "drawn"
	// OutcomeCached: answered by the memory cache.
	OutcomeCached = "cached"
	// OutcomeInvalid: refused as a problem of the document (422): a
	// parse error, a bound of its source or size, not installed.
	OutcomeInvalid = "invalid"
	// OutcomeTooLarge: stopped by a time or memory bound (413).
	OutcomeTooLarge = "too_large"
	// OutcomeError: not drawn for a reason of the server or the request
	// (no browser could start, the render was cancelled).
	OutcomeError = "error"
)

// Outcomes are the outcome labels.
var Outcomes = []string{OutcomeDrawn, OutcomeCached, OutcomeInvalid, OutcomeTooLarge, OutcomeError}

// The causes a Chromium process ends for.
const (
	// RetireWorn: it served Config.PagesPerBrowser documents.
	RetireWorn = "worn"
	// RetireStopped: a diagram's time or memory bound, or a cancelled
	// render, stopped it while it drew.
	RetireStopped = "stopped"
	// RetireCrashed: it died or its page broke by itself.
	RetireCrashed = "crashed"
	// RetireIdle: nobody used it for Config.IdleTimeout.
	RetireIdle = "idle"
	// RetireFailedStart: it did not start or could not prepare its page.
	RetireFailedStart = "failed_start"
)

// RetireCauses are the cause labels.
var RetireCauses = []string{RetireWorn, RetireStopped, RetireCrashed, RetireIdle, RetireFailedStart}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) DiagramDrawn(string, string)              {}
func (nopObserver) ObserveDiagramDraw(string, time.Duration) {}
func (nopObserver) BrowserRetired(string)                    {}
