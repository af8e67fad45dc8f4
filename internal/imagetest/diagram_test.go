package imagetest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// renderDiagrams renders a document with a Mermaid and a Graphviz diagram
// through the image's Chromium, Mermaid bundle and dot: their labels are
// text in the PDF, their source is not.
func renderDiagrams(t *testing.T, c *client) {
	t.Helper()
	md := "# Diagrams\n\n```mermaid\nflowchart LR\n    Ingest --> Typeset\n```\n\n```dot\ndigraph { Parser -> Writer }\n```\n"
	body, err := json.Marshal(map[string]string{"markdown": md})
	if err != nil {
		t.Fatal(err)
	}
	status, got, pdf := c.do(t, http.MethodPost, "/v1/render", "application/json", body)
	if status != http.StatusOK || got != "application/pdf" {
		t.Fatalf("POST /v1/render with diagrams = %d %s: %.2000s", status, got, pdf)
	}
	text := tool(t, "pdftotext", writeTemp(t, "diagrams.pdf", pdf), "-")
	for _, want := range []string{"Ingest", "Typeset", "Parser", "Writer"} {
		if !strings.Contains(text, want) {
			t.Errorf("pdftotext diagrams.pdf lacks the label %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "-->") || strings.Contains(text, "digraph") {
		t.Errorf("diagrams.pdf prints the diagrams' source:\n%s", text)
	}
}
