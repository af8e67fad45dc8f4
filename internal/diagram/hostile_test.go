package diagram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/limits"
)

// trap is an HTTP server on loopback that counts every request: a diagram
// must never reach it.
type trap struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func newTrap(t *testing.T) *trap {
	tr := &trap{}
	tr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.hits.Add(1)
		t.Logf("trap: %s %s", r.Method, r.URL)
		w.Header().Set("Content-Type", "text/css")
		_, _ = w.Write([]byte("body{}")) // the trap counts hits; the body does not matter
	}))
	t.Cleanup(tr.srv.Close)
	return tr
}

// TestHostileNoNetwork: a diagram that tries to load something — a
// themeCSS @import or @font-face, an <img> label, a style's url(), links
// and click callbacks — is drawn without a single request reaching a
// server on loopback, with the network namespace and without it (the
// interception, the page's policy and the host resolver rules alone).
func TestHostileNoNetwork(t *testing.T) {
	for _, isolate := range []bool{true, false} {
		t.Run("isolate="+strconv.FormatBool(isolate), func(t *testing.T) {
			tr := newTrap(t)
			u := tr.srv.URL
			tb := setup(t, Config{noIsolate: !isolate})
			ds := []Diagram{
				{Kind: Mermaid, Line: 1, Source: `%%{init: {"themeCSS": "@import url(` + u + `/import.css); @font-face { font-family: Trap; src: url(` + u + `/font.woff) } .label { font-family: Trap }"}}%%
flowchart LR
  A[Imported] --> B[Styles]`},
				{Kind: Mermaid, Line: 10, Source: "flowchart LR\n  A[\"<img src='" + u + "/img.png'> Picture\"] --> B[Text]"},
				{Kind: Mermaid, Line: 20, Source: "flowchart LR\n  A[\"<span style='background-image:url(" + u + "/style.png)'>Styled</span>\"] --> B[\"<svg><image href='" + u + "/image.png'/></svg>Plain\"]"},
				{Kind: Mermaid, Line: 30, Source: "flowchart LR\n  A[Clickable] --> B[Linked]\n  click A call alert()\n  click B href \"javascript:alert(1)\"\n  C[\"<a href='javascript:alert(2)'>Anchor</a>\"]\n  D[\"<script>alert(3)</script>Scripted\"]"},
				{Kind: Mermaid, Line: 40, Source: "%%{init: {\"securityLevel\": \"loose\", \"dompurifyConfig\": {\"ADD_TAGS\": [\"script\"]}}}%%\nflowchart LR\n  A[Loose] --> B[\"<img src=x onerror=alert(4)>\"]\n  click A call alert()"},
				{Kind: Mermaid, Line: 45, Source: "flowchart LR\n  A[\"<a href='https://example.org/'>Website</a>\"] --> B\n  click B href \"https://example.org/b\""},
				{Kind: Graphviz, Line: 50, Source: `digraph { a [label="Fetched" image="` + u + `/dot.png"]; b [URL="javascript:alert(5)" label="Linked"]; a -> b }`},
			}
			drs, err := tb.d.Draw(tb.ctx, ds)
			if err != nil {
				t.Fatalf("Draw = %v, want every hostile diagram drawn harmlessly", err)
			}
			checkLabels(t, "themeCSS", pageOf(t, drs[0]), []string{"Imported", "Styles"})
			checkLabels(t, "img label", pageOf(t, drs[1]), []string{"Picture", "Text"})
			checkLabels(t, "style url", pageOf(t, drs[2]), []string{"Styled", "Plain"})
			checkLabels(t, "click", pageOf(t, drs[3]), []string{"Clickable", "Linked", "Anchor", "Scripted"})
			checkLabels(t, "loose", pageOf(t, drs[4]), []string{"Loose"})
			checkLabels(t, "links", pageOf(t, drs[5]), []string{"Website"})
			checkLabels(t, "dot", pageOf(t, drs[6]), []string{"Fetched", "Linked"})
			for i, dr := range drs {
				if bytes.Contains(dr.PDF, []byte("javascript")) || bytes.Contains(dr.PDF, []byte("/URI")) {
					t.Errorf("diagram %d: the PDF holds a link", i)
				}
				if out, err := exec.Command("qpdf", "--check", writeTemp(t, dr.PDF)).CombinedOutput(); err != nil {
					t.Errorf("diagram %d: qpdf --check: %v\n%s", i, err, out)
				}
				if imgs := rasterImages(t, pageOf(t, dr)); len(imgs) > 0 {
					t.Errorf("diagram %d: raster images %q", i, imgs)
				}
			}
			if n := tr.hits.Load(); n != 0 {
				t.Errorf("the trap server on loopback saw %d requests, want none", n)
			}
			t.Logf("isolate=%v: %s", isolate, tb.d.Stats())
			if s := tb.d.Stats(); s.Isolated != isolate {
				t.Errorf("Stats.Isolated = %v, want %v", s.Isolated, isolate)
			}
		})
	}
}

// chain is a flowchart of n nodes in one chain (base-36 ids; a lone "o"
// or "x" after an arrow would be an arrow head).
func chain(n int) string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	for i := range n {
		if i > 0 {
			b.WriteString("-->")
		}
		b.WriteString("n" + strconv.FormatInt(int64(i), 36))
	}
	return b.String()
}

// cycle is a chain of n edges over 36 nodes, so that its source stays
// within the bound.
func cycle(n int) string {
	var b strings.Builder
	b.WriteString("flowchart TD\nn0")
	for i := 1; i <= n; i++ {
		b.WriteString("-->n" + strconv.FormatInt(int64(i%36), 36))
	}
	return b.String()
}

// star is a flowchart of one node with n edges, in as few bytes as it
// takes.
func star(n int) string {
	var b strings.Builder
	b.WriteString("flowchart TD\nr-->")
	for i := range n {
		if i > 0 {
			b.WriteString("&")
		}
		b.WriteString("n" + strconv.FormatInt(int64(i), 36))
	}
	return b.String()
}

// nodes is a flowchart of n unconnected nodes.
func nodes(n int) string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	for i := range n {
		b.WriteString("n" + strconv.FormatInt(int64(i), 36) + "\n")
	}
	return b.String()
}

// TestHostileLayouts: diagrams that make Mermaid's layout work hard end in
// their documented answer within their bound: 10,000 edges are Mermaid's
// edge limit (422), 10,000 nodes are drawn or stopped at the time bound
// (413), a long chain within the edge limit prints on a page no side of
// which is past PDF's 200 inches.
func TestHostileLayouts(t *testing.T) {
	tb := setupShared(t)
	for _, tt := range []struct{ name, src string }{
		{"10,000-edge chain", cycle(10_000)},
		{"10,000-edge star", star(10_000)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.src) > MaxSourceBytes {
				t.Fatalf("source has %d bytes", len(tt.src))
			}
			_, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: tt.src, Line: 4}})
			t.Logf("%s: %v", tt.name, err)
			le := limitsError(t, err)
			msg := le.Problems[0].Message
			if le.Kind != limits.KindDocument || !strings.Contains(msg, "Edge limit exceeded") && !strings.Contains(msg, "more than 40 million") {
				t.Errorf("Draw = %v, want 422: Mermaid's edge limit or the pixel bound", err)
			}
		})
	}
	t.Run("10,000 nodes", func(t *testing.T) {
		before := tb.d.Stats()
		start := time.Now()
		drs, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: nodes(10_000), Line: 4}})
		t.Logf("10,000 nodes: %v after %v", err, time.Since(start))
		if err == nil {
			if len(drs[0].PDF) == 0 {
				t.Fatal("no PDF")
			}
			return
		}
		le := limitsError(t, err)
		switch {
		case le.Kind == limits.KindTooLarge && le.Code() == limits.CodeResource:
			// Stopped by the time or memory bound: its browser is gone.
			s := tb.d.Stats()
			if s.Crashed != before.Crashed+1 {
				t.Errorf("Crashed = %d, want %d", s.Crashed, before.Crashed+1)
			}
			if alive := groupAlive(before.Pids); len(alive) > 0 {
				t.Errorf("processes %v of the stopped browser are alive", alive)
			}
		case le.Kind == limits.KindDocument:
		default:
			t.Errorf("Draw = %v, want drawn, 422 or 413 resource", err)
		}
	})
	t.Run("30-node chain", func(t *testing.T) {
		drs, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: chain(30), Line: 4}})
		if err != nil {
			t.Fatalf("Draw = %v", err)
		}
		words, _, _ := pdfWords(t, pageOf(t, drs[0]))
		if len(words) < 30 {
			t.Errorf("pdftotext finds %d words, want the 30 node labels", len(words))
		}
	})
	t.Run("30,000 pixels wide", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("sequenceDiagram\n")
		for i := range 150 {
			fmt.Fprintf(&b, "  participant P%d\n", i)
		}
		b.WriteString("  P0->>P149: Across\n")
		drs, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: b.String(), Line: 4}})
		if err != nil {
			t.Fatalf("Draw = %v", err)
		}
		dr := drs[0]
		if dr.Width > maxPaperInches*72+1 || dr.Width < maxPaperInches*72-10 {
			t.Errorf("page %.0f × %.0f pt, want scaled to 200 inches (14,400 pt) wide", dr.Width, dr.Height)
		}
		checkLabels(t, "wide", pageOf(t, dr), []string{"P0", "P75", "P149", "Across"})
	})
}

// TestTimeoutKillsBrowser: a diagram past its time bound is a 413 resource
// problem; its browser's whole process group is gone when Draw returns,
// and the document's other diagrams are drawn on a new page.
func TestTimeoutKillsBrowser(t *testing.T) {
	tb := setup(t, Config{timeout: 5 * time.Second})
	// Warm up, so that the bound meets the diagram, not the start. On a
	// machine busy with other tests even this small diagram once took
	// longer than the bound (2 s then), so it gets three tries.
	for try := 1; ; try++ {
		_, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: "graph TD\n W --> U", Line: 1}})
		if err == nil {
			break
		}
		if try == 3 {
			t.Fatalf("warm-up Draw, try %d: %v", try, err)
		}
		t.Logf("warm-up Draw, try %d: %v", try, err)
	}
	waitIdle(t, tb.d)
	before := tb.d.Stats()
	if len(before.Pids) != 1 {
		t.Fatalf("pids %v, want one browser", before.Pids)
	}
	ds := []Diagram{
		{Kind: Mermaid, Source: nodes(8000), Line: 3},
		{Kind: Mermaid, Source: "graph TD\n After --> Timeout", Line: 9},
	}
	_, err := tb.d.Draw(tb.ctx, ds)
	le := limitsError(t, err)
	if le.Kind != limits.KindTooLarge || len(le.Problems) != 1 || le.Problems[0].Line != 3 ||
		!strings.Contains(le.Problems[0].Message, "took longer than 5s") {
		t.Fatalf("Draw = %v, want one 413 resource problem at line 3 (took longer than 5s)", err)
	}
	if alive := groupAlive(before.Pids); len(alive) > 0 {
		t.Errorf("processes %v of the stopped browser are alive after Draw returned", alive)
	}
	if s := tb.d.Stats(); s.Crashed != before.Crashed+1 || s.Pages < before.Pages+2 {
		t.Errorf("stats %+v, want one more crashed browser and a second page", s)
	}
}

// TestCancelKillsBrowser: a render cancelled while its diagram is drawn
// returns ctx's error, and the browser's process group is gone.
func TestCancelKillsBrowser(t *testing.T) {
	tb := setup(t, Config{})
	if _, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: "graph TD\n W --> U", Line: 1}}); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, tb.d)
	before := tb.d.Stats()
	ctx, cancel := context.WithCancel(tb.ctx)
	time.AfterFunc(500*time.Millisecond, cancel)
	_, err := tb.d.Draw(ctx, []Diagram{{Kind: Mermaid, Source: nodes(8000), Line: 1}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Draw = %v, want context.Canceled", err)
	}
	if s := tb.d.Stats(); s.Pages != before.Pages+1 {
		t.Fatalf("pages %d → %d: the cancel did not meet a drawing", before.Pages, s.Pages)
	}
	if alive := groupAlive(before.Pids); len(alive) > 0 {
		t.Errorf("processes %v of the cancelled browser are alive after Draw returned", alive)
	}
	// The pool goes on: the next document gets a new browser.
	if _, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: "graph TD\n Next --> Document", Line: 1}}); err != nil {
		t.Fatalf("Draw after a cancel = %v", err)
	}
	d := tb.d
	if err := d.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if alive := groupAlive(d.Stats().Pids); len(alive) > 0 {
		t.Errorf("processes %v alive after Close", alive)
	}
	if _, err := d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: "graph TD\n Closed --> Pool", Line: 1}}); err == nil {
		t.Error("Draw after Close succeeded")
	}
}
