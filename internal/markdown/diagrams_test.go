package markdown

import (
	"reflect"
	"strings"
	"testing"
)

func isTestDiagram(lang string) bool { return lang == "mermaid" || lang == "dot" }

// TestDiagrams: the fences Options.Diagram accepts are listed with their
// source and the line of the opening fence; others stay code.
func TestDiagrams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		opts Options
		want []DiagramRef
	}{
		{"off", "```mermaid\ngraph TD; A-->B;\n```\n", Options{}, nil},
		{"one", "# T\n\n```mermaid\ngraph TD\n A-->B\n```\n", Options{Diagram: isTestDiagram},
			[]DiagramRef{{Lang: "mermaid", Source: "graph TD\n A-->B\n", Line: 3}}},
		{"info words and other code", "```go\nx\n```\n\n```dot {.big}\ndigraph {}\n```\n", Options{Diagram: isTestDiagram},
			[]DiagramRef{{Lang: "dot", Source: "digraph {}\n", Line: 5}}},
		{"front matter offset, in a list", "- item\n\n  ```mermaid\n  pie\n  ```\n", Options{Diagram: isTestDiagram, LineOffset: 4},
			[]DiagramRef{{Lang: "mermaid", Source: "pie\n", Line: 7}}},
	}
	for _, tc := range tests {
		d, err := Parse([]byte(tc.src), tc.opts)
		if err != nil {
			t.Fatalf("Parse(%s) = %v", tc.name, err)
		}
		if got := d.Diagrams(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Parse(%s).Diagrams() = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestDiagramLaTeX: a drawn diagram is an unsplittable figure of its PDF at
// its size; one without a drawing prints as the code it is.
func TestDiagramLaTeX(t *testing.T) {
	t.Parallel()
	d, err := Parse([]byte("```mermaid\ngraph TD; A-->B;\n```\n\n```mermaid\npie\n```\n"), Options{Diagram: isTestDiagram})
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.LaTeX(Meta{Title: "T"}, map[string]Image{DiagramKey(0): {File: "diagram-0.pdf", Width: 200, Height: 100.5}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\\begin{opfigure}{c}\n\\opimg{\\linewidth}{200.00pt}{100.50pt}{diagram-0.pdf}\n\\end{opfigure}", "pie"} {
		if !strings.Contains(out.Body, want) {
			t.Errorf("LaTeX body lacks %q:\n%s", want, out.Body)
		}
	}
	if n := strings.Count(out.Body, `\opimg`); n != 1 {
		t.Errorf("LaTeX body has %d images, want 1 (the drawn diagram):\n%s", n, out.Body)
	}
	if strings.Contains(out.Body, "graph") {
		t.Errorf("LaTeX body prints the drawn diagram's source:\n%s", out.Body)
	}
}

// TestDiagramKeep: a diagram's page of a shared PDF is named
// (\opimgpage), and a paragraph ending right before a diagram is kept
// with it (\nopagebreak between them); a heading, a list or a paragraph
// of images before it is not such an introduction.
func TestDiagramKeep(t *testing.T) {
	t.Parallel()
	const fig = "\\begin{opfigure}{c}\n"
	tests := []struct {
		name, src string
		keep      bool
	}{
		{"introducing sentence", "The flow:\n\n```mermaid\ngraph TD; A-->B;\n```\n", true},
		{"long paragraph", strings.Repeat("Words of a paragraph. ", 40) + "\n\n```mermaid\ngraph TD; A-->B;\n```\n", true},
		{"in a list item", "- The flow:\n\n  ```mermaid\n  graph TD; A-->B;\n  ```\n", true},
		{"after a heading", "# Flow\n\n```mermaid\ngraph TD; A-->B;\n```\n", false},
		{"after a list", "- one\n- two\n\n```mermaid\ngraph TD; A-->B;\n```\n", false},
		{"after an image", "![x](a.png)\n\n```mermaid\ngraph TD; A-->B;\n```\n", false},
		{"first block", "```mermaid\ngraph TD; A-->B;\n```\n", false},
	}
	for _, tc := range tests {
		d, err := Parse([]byte(tc.src), Options{Diagram: isTestDiagram})
		if err != nil {
			t.Fatalf("Parse(%s) = %v", tc.name, err)
		}
		imgs := map[string]Image{DiagramKey(0): {File: "diagram-0.pdf", Page: 3, Width: 200, Height: 100}, "a.png": {File: "img-01.png", Width: 10, Height: 10}}
		out, err := d.LaTeX(Meta{Title: "T"}, imgs)
		if err != nil {
			t.Fatalf("LaTeX(%s) = %v", tc.name, err)
		}
		if want := "\\opimgpage{3}{\\linewidth}{200.00pt}{100.00pt}{diagram-0.pdf}"; !strings.Contains(out.Body, want) {
			t.Errorf("LaTeX(%s) lacks %q:\n%s", tc.name, want, out.Body)
		}
		if got := strings.Contains(out.Body, "\\nopagebreak\n"+fig); got != tc.keep {
			t.Errorf("LaTeX(%s) keeps the paragraph before the diagram = %v, want %v:\n%s", tc.name, got, tc.keep, out.Body)
		}
	}
}
