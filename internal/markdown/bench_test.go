package markdown

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yuin/goldmark/text"

	"github.com/outprint/outprint/internal/highlight"
	"github.com/outprint/outprint/internal/testenv"
)

// BenchmarkLaTeX measures Parse and LaTeX together on the shared
// handbook (every Outline construct), in Markdown bytes per second.
func BenchmarkLaTeX(b *testing.B) {
	shared := testenv.SharedDir(b, "../..")
	if shared == "" {
		testenv.Missing(b, "../shared/corpus/handbook.md")
	}
	src, err := os.ReadFile(filepath.Join(shared, "corpus", "handbook.md"))
	if err != nil {
		b.Fatal(err)
	}
	images := map[string]Image{
		"images/architecture.svg": {File: "architecture.pdf", Width: 480, Height: 270},
		"images/chart.png":        {File: "chart.png", Width: 600, Height: 300},
	}
	meta := Meta{Title: "Platform Engineering Handbook", Author: "Platform team", TOC: true, NumberSections: true}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := Parse(src, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.LaTeX(meta, images); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLaTeXNoCode is BenchmarkLaTeX on the handbook without its
// code blocks: the writer's own speed, without chroma's highlighting.
func BenchmarkLaTeXNoCode(b *testing.B) {
	shared := testenv.SharedDir(b, "../..")
	if shared == "" {
		testenv.Missing(b, "../shared/corpus/handbook.md")
	}
	src, err := os.ReadFile(filepath.Join(shared, "corpus", "handbook.md"))
	if err != nil {
		b.Fatal(err)
	}
	s := string(src)
	for {
		i := strings.Index(s, "```")
		j := strings.Index(s[i+3:], "```")
		if i < 0 || j < 0 {
			break
		}
		s = s[:i] + s[i+3+j+3:]
	}
	src = []byte(s)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		d, err := Parse(src, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.LaTeX(Meta{Title: "Platform Engineering Handbook", TOC: true}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGoldmark is the floor: goldmark's own parse of the handbook
// with the same extensions, nothing else.
func BenchmarkGoldmark(b *testing.B) {
	shared := testenv.SharedDir(b, "../..")
	if shared == "" {
		testenv.Missing(b, "../shared/corpus/handbook.md")
	}
	src, err := os.ReadFile(filepath.Join(shared, "corpus", "handbook.md"))
	if err != nil {
		b.Fatal(err)
	}
	p := parserFor(DialectOutline)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		p.Parse(text.NewReader(src))
	}
}

// BenchmarkLaTeXTables measures the 144-row and 10-column tables.
func BenchmarkLaTeXTables(b *testing.B) {
	shared := testenv.SharedDir(b, "../..")
	if shared == "" {
		testenv.Missing(b, "../shared/corpus/tables.md")
	}
	src, err := os.ReadFile(filepath.Join(shared, "corpus", "tables.md"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		d, err := Parse(src, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.LaTeX(Meta{Title: "Tables"}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHighlight measures HighlightCode alone on the handbook's code
// blocks (bash, Go, Python), in bytes of code per second.
func BenchmarkHighlight(b *testing.B) {
	shared := testenv.SharedDir(b, "../..")
	if shared == "" {
		testenv.Missing(b, "../shared/corpus/handbook.md")
	}
	src, err := os.ReadFile(filepath.Join(shared, "corpus", "handbook.md"))
	if err != nil {
		b.Fatal(err)
	}
	type block struct{ lang, code string }
	var blocks []block
	size := 0
	for rest := string(src); ; {
		i := strings.Index(rest, "```")
		if i < 0 {
			break
		}
		lang, body, _ := strings.Cut(rest[i+3:], "\n")
		j := strings.Index(body, "```")
		if j < 0 {
			break
		}
		blocks = append(blocks, block{lang, body[:j]})
		size += j
		rest = body[j+3:]
	}
	if len(blocks) != 3 {
		b.Fatalf("handbook.md has %d code blocks, want 3", len(blocks))
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, bl := range blocks {
			highlight.Code(bl.lang, bl.code)
		}
	}
}
