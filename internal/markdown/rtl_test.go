package markdown

import (
	"strings"
	"testing"
	"unicode"

	"github.com/outprint/outprint/internal/latextest"
)

// TestRightToLeftWriterXeLaTeX is script's TestRightToLeftOrderXeLaTeX
// for the writer: the Arabic and Hebrew lines of the multilingual corpus, and
// right-to-left sentences across Markdown markup and line ends, go through
// Parse, LaTeX and XeLaTeX with the writer's preamble, one paragraph a
// page, and must read from right to left in order.
func TestRightToLeftWriterXeLaTeX(t *testing.T) {
	var paragraphs []string
	for _, line := range latextest.CorpusLines(t, "../..") {
		if strings.ContainsFunc(line, func(r rune) bool { return unicode.In(r, unicode.Arabic, unicode.Hebrew) }) && strings.HasPrefix(line, "- ") {
			paragraphs = append(paragraphs, line)
		}
	}
	if len(paragraphs) != 2 {
		t.Fatalf("multilingual.md has %d Arabic or Hebrew list items, want 2: %q", len(paragraphs), paragraphs)
	}
	paragraphs = append(paragraphs,
		"ברוכים הבאים!\nצוות התמיכה כאן", // a soft line end inside the stretch
		"مرحبا **بكم** في _فريق_ [الدعم](https://example.com) `هنا` اليوم",
		"שלום, **עולם**: אחת (*שתיים*) 12:30, שלוש.",
		"عنوان: **2024** ثم ~~شطب~~ نهاية",
		"Latin first, then **עברית: שלום עולם** and Latin again.",
		"אחת $x^2$ שתיים ![תמונה](missing.png) שלוש",
	)
	src := strings.Join(paragraphs, "\n\n***\n\n")
	d, err := Parse([]byte(src), Options{Dialect: DialectOutline}) // *** is a page break
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.LaTeX(Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc := Preamble(Profile{Scripts: d.Scripts()}) + "\\begin{document}\n\\pagestyle{empty}\n" + out.Body + "\\end{document}\n"
	log, pdf := latextest.MustCompile(t, doc)
	if m := latextest.MissingCharacters(log); len(m) > 0 {
		t.Errorf("XeTeX lost %d characters:\n%s", len(m), strings.Join(m, "\n"))
	}
	if strings.Contains(log, `\endL or \endR problem`) {
		t.Errorf("XeTeX found unbalanced \\beginR and \\endR:\n%s", out.Body)
	}
	latextest.CheckRTLOrder(t, pdf, paragraphs)
}
