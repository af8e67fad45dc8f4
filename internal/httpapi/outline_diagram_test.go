package httpapi

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/diagram"
	"github.com/outprint/outprint/internal/outline/outlinetest"
	"github.com/outprint/outprint/internal/testenv"
)

// olDrawer is a diagram drawer for a test, closed when it ends; it needs
// Chromium and the Mermaid bundle.
func olDrawer(t *testing.T) *diagram.Drawer {
	t.Helper()
	testenv.Require(t, "chromium", "prlimit", "pdfimages")
	if _, err := os.Stat(filepath.Join(diagram.DefaultMermaidDir, "mermaid.min.js")); err != nil {
		testenv.Missing(t, "mermaid is not installed (run scripts/mermaid.sh)")
	}
	d, err := diagram.New(diagram.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// olDiagramText is a document as Outline's serializer writes a Mermaid
// diagram: a ```mermaidjs fence, its source on one line
// (outline-recordings/gallery-serialized.md).
func olDiagramText(from, to string) string {
	return "How a page moves.\n\n```mermaidjs\ngraph TD; " + from + "-->" + to + ";\n```\n\nThat is all.\n"
}

// olCheckDiagram fails unless pdf shows the labels as text, no diagram
// source and no raster image.
func olCheckDiagram(t *testing.T, pdf []byte, labels ...string) {
	t.Helper()
	text := olPDFTool(t, pdf, "pdftotext")
	for _, l := range labels {
		if !strings.Contains(text, l) {
			t.Errorf("PDF text lacks the diagram label %q:\n%s", l, text)
		}
	}
	if strings.Contains(text, "-->") || strings.Contains(text, "graph TD") {
		t.Errorf("PDF text has the diagram's source:\n%s", text)
	}
	path := filepath.Join(t.TempDir(), "d.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdfimages", "-list", path).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfimages: %v\n%s", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) > 2 {
		t.Errorf("pdfimages -list = %q, want no raster image", lines[2:])
	}
}

// TestOutlineDiagram: a newcomer's Outline page with a Mermaid diagram
// prints it as a drawing with searchable labels, through the document
// route and the collection route.
func TestOutlineDiagram(t *testing.T) {
	e := newOlEnv(t, olOptions{tex: true, diagrams: olDrawer(t)})
	doc := e.fake.AddDocument(outlinetest.Document{Title: "Publishing", Text: olDiagramText("Drafted", "Published"), CreatedBy: e.janePerson})
	a := e.get("/render/"+doc.ID, e.jane.Token, nil)
	if a.status != http.StatusOK {
		t.Fatalf("GET /render/%s = %d, want 200: %s", doc.ID, a.status, a.body)
	}
	olCheckDiagram(t, a.body, "Drafted", "Published")

	col := e.fake.AddCollection(outlinetest.Collection{Name: "Processes"})
	first := e.fake.AddDocument(outlinetest.Document{Title: "Intake", Text: olDiagramText("Received", "Sorted"),
		CollectionID: col.ID, CreatedBy: e.janePerson})
	e.fake.AddDocument(outlinetest.Document{Title: "Review", Text: olDiagramText("Checked", "Approved"),
		CollectionID: col.ID, ParentID: first.ID, CreatedBy: e.janePerson})
	a = e.get("/render/collection/"+col.ID, e.jane.Token, nil)
	if a.status != http.StatusOK {
		t.Fatalf("GET /render/collection/%s = %d, want 200: %s", col.ID, a.status, a.body)
	}
	olCheckDiagram(t, a.body, "Received", "Sorted", "Checked", "Approved")
}

// TestOutlineDiagramProblem: a diagram Mermaid cannot parse is a 422
// naming the fence's line, not a listing or a TeX error.
func TestOutlineDiagramProblem(t *testing.T) {
	e := newOlEnv(t, olOptions{tex: true, diagrams: olDrawer(t)})
	doc := e.fake.AddDocument(outlinetest.Document{Title: "Broken", Text: "Intro.\n\n```mermaidjs\ngraph TD; A-->((((;\n```\n", CreatedBy: e.janePerson})
	a := e.get("/render/"+doc.ID, e.jane.Token, nil)
	if a.status != http.StatusUnprocessableEntity {
		t.Fatalf("GET /render/%s = %d, want 422: %s", doc.ID, a.status, a.body)
	}
	ps := a.problems(t)
	if len(ps) != 1 || ps[0].Line != 4 || !strings.Contains(ps[0].Message, "mermaid diagram at line 3") {
		t.Errorf("problems = %+v, want one at line 4 naming the diagram at line 3", ps)
	}
}
