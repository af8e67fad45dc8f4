package diagram

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu      sync.Mutex
	drawn   map[string]int // engine/outcome
	draws   map[string]int // engine
	retired map[string]int // cause
}

func newRecorder() *recorder {
	return &recorder{drawn: map[string]int{}, draws: map[string]int{}, retired: map[string]int{}}
}

func (r *recorder) DiagramDrawn(engine, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drawn[engine+"/"+outcome]++
}

func (r *recorder) ObserveDiagramDraw(engine string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d > 0 {
		r.draws[engine]++
	}
}

func (r *recorder) BrowserRetired(cause string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retired[cause]++
}

func (r *recorder) counts() (drawn, draws, retired map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cp := func(m map[string]int) map[string]int {
		out := map[string]int{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return cp(r.drawn), cp(r.draws), cp(r.retired)
}

// TestObserver: each diagram of a Draw is told with its engine and
// outcome, each document's drawing time per engine, and each browser
// that ended with its cause.
func TestObserver(t *testing.T) {
	rec := newRecorder()
	tb := setup(t, Config{Observer: rec, PagesPerBrowser: 1})
	doc := []Diagram{
		{Kind: Mermaid, Line: 1, Source: "graph TD\n  Seen --> Told"},
		{Kind: Mermaid, Line: 5, Source: "graph TD\n  A --> (((("},
		{Kind: Graphviz, Line: 9, Source: "digraph { Dot -> Told }"},
	}
	if _, err := tb.d.Draw(tb.ctx, doc); err == nil {
		t.Fatal("Draw of a document with a parse error = nil, want its problem")
	}
	if _, err := tb.d.Draw(tb.ctx, []Diagram{doc[0], doc[2]}); err != nil {
		t.Fatal(err)
	}
	drawn, draws, retired := rec.counts()
	want := map[string]int{"mermaid/drawn": 1, "mermaid/invalid": 1, "graphviz/drawn": 1, "mermaid/cached": 1, "graphviz/cached": 1}
	for k, v := range want {
		if drawn[k] != v {
			t.Errorf("DiagramDrawn %s told %d times, want %d (all: %v)", k, drawn[k], v, drawn)
		}
	}
	if len(drawn) != len(want) {
		t.Errorf("DiagramDrawn told %v, want %v", drawn, want)
	}
	if draws["mermaid"] != 1 || draws["graphviz"] != 1 {
		t.Errorf("ObserveDiagramDraw told %v, want one document each (the cached one is not drawn)", draws)
	}
	// PagesPerBrowser 1: the first document wore its browser out.
	if retired[RetireWorn] != 1 || len(retired) != 1 {
		t.Errorf("BrowserRetired told %v, want one worn browser", retired)
	}
}

// TestReady: a drawer is ready before any browser started (none is
// started to find out); once no browser can start, Draw fails, its
// diagrams are told as errors, and Ready says why until one can.
func TestReady(t *testing.T) {
	rec := newRecorder()
	tb := setup(t, Config{Chromium: "false", Observer: rec})
	ctx, cancel := context.WithTimeout(tb.ctx, time.Minute)
	defer cancel()
	if err := tb.d.Ready(ctx); err != nil {
		t.Fatalf("Ready before any diagram = %v, want nil", err)
	}
	if s := tb.d.Stats(); s.Started != 0 || s.Browsers != 0 {
		t.Fatalf("Ready started a browser: %s", s)
	}
	_, err := tb.d.Draw(ctx, []Diagram{{Kind: Mermaid, Line: 1, Source: "graph TD\n  A --> B"}})
	if err == nil {
		t.Fatal("Draw with a browser that cannot start = nil, want an error")
	}
	err = tb.d.Ready(ctx)
	if err == nil || !strings.Contains(err.Error(), "no browser can start") {
		t.Errorf("Ready after a failed start = %v, want no browser can start", err)
	}
	drawn, _, retired := rec.counts()
	if drawn["mermaid/error"] != 1 || retired[RetireFailedStart] < 1 {
		t.Errorf("observer told %v and %v, want the diagram as an error and a failed start", drawn, retired)
	}
}
