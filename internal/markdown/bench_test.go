package markdown

import (
	"os"
	"path/filepath"
	"testing"

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
