package render

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/outprint/outprint/internal/diagram"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/markdown"
)

// Diagrams are drawn in the Render stage, inside the render's deadline and
// its slot, before the LaTeX is written: a slot holds its diagrams'
// browser time too. Check refuses what cannot be drawn at all (too many,
// too large, not installed) with the document's other problems.

// isDiagram is markdown.Options.Diagram: the fence languages package
// diagram draws.
func isDiagram(lang string) bool {
	_, ok := diagram.KindOf(lang)
	return ok
}

// diagramsOf returns the document's diagrams as package diagram takes them.
func diagramsOf(doc *markdown.Document) []diagram.Diagram {
	refs := doc.Diagrams()
	ds := make([]diagram.Diagram, len(refs))
	for i, r := range refs {
		kind, _ := diagram.KindOf(r.Lang)
		ds[i] = diagram.Diagram{Kind: kind, Source: r.Source, Line: r.Line}
	}
	return ds
}

// diagramBatches splits a document's diagrams into the batches Draw takes:
// one document at most diagram.MaxDiagrams, a collection of parts
// documents that many per document, each document's share bounded by the
// single-document limits as its images are.
func diagramBatches(ds []diagram.Diagram, parts int) [][]diagram.Diagram {
	if parts <= 1 || len(ds) <= diagram.MaxDiagrams {
		return [][]diagram.Diagram{ds}
	}
	if max := parts * diagram.MaxDiagrams; len(ds) > max {
		// Past the collection's bound: one batch over the bound, which
		// Check and Draw refuse with the count.
		return [][]diagram.Diagram{ds}
	}
	var out [][]diagram.Diagram
	for len(ds) > 0 {
		n := min(len(ds), diagram.MaxDiagrams)
		out = append(out, ds[:n])
		ds = ds[n:]
	}
	return out
}

// checkDiagrams runs the drawer's cheap checks on the document's
// diagrams.
func (p *Pipeline) checkDiagrams(doc *markdown.Document, parts int) error {
	if p.diagrams == nil || doc == nil {
		return nil
	}
	ds := diagramsOf(doc)
	if len(ds) == 0 {
		return nil
	}
	for _, b := range diagramBatches(ds, parts) {
		if err := p.diagrams.Check(b); err != nil {
			return err
		}
	}
	return nil
}

// drawDiagrams draws the document's diagrams into dir as one-page PDFs and
// adds them to the images LaTeX places (markdown.DiagramKey) and the files
// TeX sees. A document without diagrams starts nothing.
func (p *Pipeline) drawDiagrams(ctx context.Context, dir string, doc *markdown.Document, parts int, imageBytes int64, imgs map[string]markdown.Image, files map[string]string) error {
	if p.diagrams == nil {
		return nil
	}
	ds := diagramsOf(doc)
	if len(ds) == 0 {
		return nil
	}
	var drawn []diagram.Drawing
	for _, b := range diagramBatches(ds, parts) {
		drawings, err := p.diagrams.Draw(ctx, b)
		if err != nil {
			return err
		}
		drawn = append(drawn, drawings...)
	}
	// A document's Mermaid diagrams share one PDF, a page each: each PDF
	// is written, and counted, once.
	pdfs, index := diagram.DistinctPDFs(drawn)
	total := imageBytes
	for _, pdf := range pdfs {
		total += int64(len(pdf))
	}
	if total > limits.MaxTotalImageBytes {
		return limits.Invalid(limits.Problem{
			Field: "diagrams", Source: limits.SourceDocument, Code: limits.CodeInvalid,
			Message: fmt.Sprintf("the document's images (%d bytes) and diagrams (%d bytes) together exceed the %d bytes of graphics a document may have",
				imageBytes, total-imageBytes, limits.MaxTotalImageBytes),
		})
	}
	for k, pdf := range pdfs {
		name := fmt.Sprintf("diagram-%d.pdf", k)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pdf, 0o600); err != nil {
			return fmt.Errorf("diagram file: %w", err)
		}
		files[name] = path
	}
	for i, dr := range drawn {
		if index[i] < 0 {
			continue
		}
		imgs[markdown.DiagramKey(i)] = markdown.Image{File: fmt.Sprintf("diagram-%d.pdf", index[i]), Page: dr.Page, Width: dr.Width, Height: dr.Height}
	}
	return nil
}
