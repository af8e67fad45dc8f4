package render

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestTextKeptAsTyped: what CommonMark makes text prints as typed, as
// pdftotext reads it back — an invalid link destination in a reference
// definition or a link (an unescaped '<' inside pointy brackets, CommonMark
// 6.3) and a numeric reference beyond U+10FFFF (issue 25, item 5; these
// used to vanish from the page).
func TestTextKeptAsTyped(t *testing.T) {
	p := newPipeline(t)
	cases := []string{"[a]: <te<st>", "[](<foo<bar>)", "&#x1100000;"}
	for _, dialect := range []string{"", `{"dialect":"outline"}`} {
		src := "# Text kept\n\n" + strings.Join(cases, "\n\n") + "\n\nThe end.\n"
		res, err := p.Do(context.Background(), Request{Name: "kept.md", Markdown: []byte(src), Metadata: []byte(dialect)}, nil)
		if err != nil {
			t.Fatalf("render (metadata %q): %v", dialect, err)
		}
		path := writePDF(t, res.PDF, "kept.pdf")
		out, err := exec.Command("pdftotext", path, "-").Output()
		if err != nil {
			t.Fatalf("pdftotext: %v", err)
		}
		lines := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			lines[strings.TrimSpace(l)] = true
		}
		for _, c := range cases {
			if !lines[c] {
				t.Errorf("metadata %q: pdftotext gives %q, want the line %q as typed", dialect, out, c)
			}
		}
	}
}
