package render

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// pdfFacts is what the independent poppler and qpdf tools say about a PDF.
// The tests judge our output by these tools, never by our own code.
type pdfFacts struct {
	Pages    int
	Info     string // pdfinfo output
	Text     string // pdftotext output, NFKC, without bidi marks
	Fonts    string // pdffonts output
	PageSize string
}

var bidiMarks = strings.NewReplacer(
	"\u200e", "", "\u200f", "", "\u202a", "", "\u202b", "", "\u202c", "", "\u202d", "", "\u202e", "",
	"\u2066", "", "\u2067", "", "\u2068", "", "\u2069", "",
)

// inspectPDFPath returns only the pdftotext output of a PDF file.
func inspectPDFPath(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("pdftotext", "-enc", "UTF-8", path, "-").CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext %s: %v\n%s", path, err, out)
	}
	return string(out)
}

func inspectPDF(t *testing.T, pdf []byte) pdfFacts {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.pdf")
	if err := os.WriteFile(path, pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	var f pdfFacts
	f.Info = run("pdfinfo", path)
	m := regexp.MustCompile(`(?m)^Pages:\s+(\d+)`).FindStringSubmatch(f.Info)
	if m == nil {
		t.Fatalf("pdfinfo gave no page count:\n%s", f.Info)
	}
	f.Pages, _ = strconv.Atoi(m[1])
	if m := regexp.MustCompile(`(?m)^Page size:\s+(.*)$`).FindStringSubmatch(f.Info); m != nil {
		f.PageSize = m[1]
	}
	f.Text = bidiMarks.Replace(norm.NFKC.String(run("pdftotext", "-enc", "UTF-8", path, "-")))
	f.Fonts = run("pdffonts", path)
	check := run("qpdf", "--check", path)
	if !strings.Contains(check, "No syntax or stream encoding errors found") {
		t.Errorf("qpdf --check:\n%s", check)
	}
	return f
}

// assertFontsEmbedded fails when pdffonts lists a font that is not embedded.
func assertFontsEmbedded(t *testing.T, fonts string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(fonts), "\n")
	if len(lines) < 3 {
		t.Fatalf("pdffonts lists no font:\n%s", fonts)
	}
	for _, l := range lines[2:] {
		fields := strings.Fields(l)
		// name type [type...] encoding emb sub uni object ID: "emb" is the
		// fifth field from the end.
		if len(fields) < 6 {
			continue
		}
		if emb := fields[len(fields)-5]; emb != "yes" {
			t.Errorf("font not embedded: %s", l)
		}
	}
}

// squash removes all white space, so that text broken across lines by
// pdftotext still compares.
func squash(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		if r == ' ' || r == '\n' || r == '\t' || r == '\r' || r == '\f' || r == '\u00a0' {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
