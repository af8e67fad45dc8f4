package diagram

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
)

// TestProblems: every diagram that cannot be drawn is one problem of the
// error list, collected with the others, naming the fence's first line and
// the renderer's own message at the document's line.
func TestProblems(t *testing.T) {
	tb := setupShared(t)
	big := "graph TD\n"
	for len(big) <= MaxSourceBytes+1024 {
		big += "%% a comment line that pads the diagram past its bound\n"
	}
	tests := []struct {
		name     string
		dg       Diagram
		kind     limits.Kind
		code     string
		line     int
		contains []string
	}{
		{"mermaid parse error", Diagram{Kind: Mermaid, Source: "flowchart TD\n  A --> B\n  B --> C[unclosed\n", Line: 40},
			limits.KindDocument, limits.CodeInvalid, 43, []string{"mermaid diagram at line 40", "Parse error on line 43"}},
		{"mermaid after a directive", Diagram{Kind: Mermaid, Source: "%%{init: {\"theme\": \"forest\"}}%%\nflowchart TD\n  A --> B B C\n", Line: 20},
			limits.KindDocument, limits.CodeInvalid, 23, []string{"Parse error on line 23"}},
		{"mermaid after front matter", Diagram{Kind: Mermaid, Source: "---\ntitle: Flow\n---\nflowchart TD\n  A --> B B C\n", Line: 20},
			limits.KindDocument, limits.CodeInvalid, 25, []string{"Parse error on line 25"}},
		{"mermaid unknown type", Diagram{Kind: Mermaid, Source: "notADiagram\n  A --> B\n", Line: 7},
			limits.KindDocument, limits.CodeInvalid, 7, []string{"mermaid diagram at line 7", "No diagram type detected"}},
		{"mermaid langium parser", Diagram{Kind: Mermaid, Source: "pie title Pets\n  \"Dogs\" : 386\n  \"Cats\" 85\n", Line: 3},
			limits.KindDocument, limits.CodeInvalid, 6, []string{"mermaid diagram at line 3", "line 6, column 10"}},
		{"dot syntax error", Diagram{Kind: Graphviz, Source: "digraph G {\n  a -> b\n  b -> -> c\n}\n", Line: 12},
			limits.KindDocument, limits.CodeInvalid, 15, []string{"dot diagram at line 12", "syntax error in line 15"}},
		{"65 KiB of source", Diagram{Kind: Mermaid, Source: big, Line: 5},
			limits.KindDocument, limits.CodeInvalid, 5, []string{"at most 65536"}},
		{"65 KiB of dot", Diagram{Kind: Graphviz, Source: "digraph{" + strings.Repeat(" ", MaxSourceBytes) + "}", Line: 5},
			limits.KindDocument, limits.CodeInvalid, 5, []string{"at most 65536"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tb.d.Draw(tb.ctx, []Diagram{tt.dg})
			le := limitsError(t, err)
			if le.Kind != tt.kind || len(le.Problems) != 1 {
				t.Fatalf("Draw = %v, want one %s problem", err, tt.kind)
			}
			p := le.Problems[0]
			if p.Code != tt.code || p.Line != tt.line || p.Field != "diagrams" || p.Source != limits.SourceDocument {
				t.Errorf("Draw problem = %+v, want code %s line %d field diagrams", p, tt.code, tt.line)
			}
			for _, c := range tt.contains {
				if !strings.Contains(p.Message, c) {
					t.Errorf("Draw message = %q, want it to contain %q", p.Message, c)
				}
			}
			if strings.ContainsAny(p.Message, "\n\r") {
				t.Errorf("Draw message %q has line breaks", p.Message)
			}
		})
	}

	t.Run("collected", func(t *testing.T) {
		ds := []Diagram{
			{Kind: Mermaid, Source: "flowchart TD\n A --> B\n", Line: 1},
			{Kind: Mermaid, Source: "flowchart TD\n A --> \n", Line: 10},
			{Kind: Graphviz, Source: "digraph { a -> }", Line: 20},
			{Kind: Graphviz, Source: "digraph { a -> b }", Line: 30},
		}
		_, err := tb.d.Draw(tb.ctx, ds)
		le := limitsError(t, err)
		var lines []int
		for _, p := range le.Problems {
			lines = append(lines, p.Line/10*10)
		}
		if le.Kind != limits.KindDocument || fmt.Sprint(lines) != "[10 20]" {
			t.Errorf("Draw = %v, want problems of the diagrams at lines 10 and 20", err)
		}
	})

	t.Run("51 diagrams", func(t *testing.T) {
		var ds []Diagram
		for i := range MaxDiagrams + 1 {
			ds = append(ds, Diagram{Kind: Graphviz, Source: fmt.Sprintf("digraph { n%d }", i), Line: i + 1})
		}
		before := tb.d.Stats()
		_, err := tb.d.Draw(tb.ctx, ds)
		le := limitsError(t, err)
		if le.Kind != limits.KindDocument || len(le.Problems) != 1 || !strings.Contains(le.Problems[0].Message, "51 diagrams, at most 50") {
			t.Errorf("Draw(51 diagrams) = %v, want one problem: 51 diagrams, at most 50", err)
		}
		if s := tb.d.Stats(); s.Pages != before.Pages {
			t.Errorf("Draw(51 diagrams) used a page: pages %d → %d", before.Pages, s.Pages)
		}
	})
}

// TestNotInstalled: without Chromium, the Mermaid bundle or dot, a diagram
// is a clear 422, and the Drawer says why.
func TestNotInstalled(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		dg   Diagram
	}{
		{"no mermaid bundle", Config{MermaidDir: t.TempDir()}, Diagram{Kind: Mermaid, Source: "graph TD\nA-->B", Line: 3}},
		{"mermaid off", Config{MermaidDir: "-"}, Diagram{Kind: Mermaid, Source: "graph TD\nA-->B", Line: 3}},
		{"no chromium", Config{Chromium: "/nonexistent/chromium"}, Diagram{Kind: Mermaid, Source: "graph TD\nA-->B", Line: 3}},
		{"no dot", Config{Dot: "/nonexistent/dot"}, Diagram{Kind: Graphviz, Source: "digraph{a}", Line: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = d.Close() }() // the drawer is not under test here
			a := d.Available()
			if tt.dg.Kind == Mermaid && (a.Mermaid || a.MermaidReason == "") || tt.dg.Kind == Graphviz && (a.Graphviz || a.GraphvizReason == "") {
				t.Errorf("Available() = %+v, want %s unavailable with a reason", a, tt.dg.Kind)
			}
			_, err = d.Draw(context.Background(), []Diagram{tt.dg})
			le := limitsError(t, err)
			if le.Kind != limits.KindDocument || !strings.Contains(le.Problems[0].Message, "diagrams are not installed on this server") || le.Problems[0].Line != 3 {
				t.Errorf("Draw = %v, want 422 'diagrams are not installed on this server' at line 3", err)
			}
			if s := d.Stats(); s.Started != 0 {
				t.Errorf("a browser was started: %+v", s)
			}
		})
	}
}

// TestNoDiagramNoBrowser: Graphviz diagrams and diagrams from the cache
// start no Chromium; the cache gives the same bytes.
func TestNoDiagramNoBrowser(t *testing.T) {
	tb := setup(t, Config{})
	dot := []Diagram{{Kind: Graphviz, Source: "digraph { Alpha -> Beta }", Line: 1}}
	first, err := tb.d.Draw(tb.ctx, dot)
	if err != nil {
		t.Fatal(err)
	}
	if s := tb.d.Stats(); s.Started != 0 || s.Browsers != 0 {
		t.Errorf("a Graphviz diagram started Chromium: %+v", s)
	}
	if _, err := tb.d.Draw(tb.ctx, nil); err != nil {
		t.Fatal(err)
	}
	if s := tb.d.Stats(); s.Started != 0 {
		t.Errorf("no diagrams started Chromium: %+v", s)
	}
	again, err := tb.d.Draw(tb.ctx, dot)
	if err != nil || string(again[0].PDF) != string(first[0].PDF) {
		t.Errorf("Draw again = %v, same bytes %v; want the cached bytes", err, err == nil && string(again[0].PDF) == string(first[0].PDF))
	}

	mm := []Diagram{{Kind: Mermaid, Source: "graph LR\n Alpha --> Beta", Line: 1}}
	m1, err := tb.d.Draw(tb.ctx, mm)
	if err != nil {
		t.Fatal(err)
	}
	s1 := tb.d.Stats()
	m2, err := tb.d.Draw(tb.ctx, mm)
	if err != nil {
		t.Fatal(err)
	}
	if s2 := tb.d.Stats(); s2.Pages != s1.Pages || string(m1[0].PDF) != string(m2[0].PDF) {
		t.Errorf("the same Mermaid source again took a page (%d → %d) or other bytes", s1.Pages, s2.Pages)
	}
}
