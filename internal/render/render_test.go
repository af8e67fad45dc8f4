package render

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/tex/textest"
)

// moduleRoot is the repository root, two folders above this package
// (go test runs in the package's folder).
func moduleRoot() string { return filepath.Join("..", "..") }

// newPipeline is a pipeline on the shared warm pool (testEngine), as the
// service renders.
func newPipeline(t *testing.T) *Pipeline {
	t.Helper()
	return newPipelineOn(t, testEngine(t))
}

// newColdPipeline is a pipeline on a cold tex.Runner of its own, for the
// tests that compare the pool with it.
func newColdPipeline(t *testing.T) *Pipeline {
	t.Helper()
	runner, err := tex.NewRunner(tex.RunnerConfig{TempDir: t.TempDir()})
	if err != nil {
		t.Fatalf("tex.NewRunner: %v", err)
	}
	return newPipelineOn(t, runner)
}

// newPipelineOn is a pipeline typesetting with engine, once the tools
// that the tests check its PDFs with are there.
func newPipelineOn(t *testing.T, engine Engine) *Pipeline {
	t.Helper()
	testenv.Require(t, "xelatex", "rsvg-convert", "pdfinfo", "pdftotext", "pdffonts", "qpdf")
	return New(Config{Engine: engine, TempDir: t.TempDir()})
}

// sharedPool is the warm TeX pool of the tests that only need documents
// typeset (textest.SharedPool), the engine the service renders with.
// Under -race this package used 263 CPU-s rendering cold (in a whole -race
// run), 254 on a pool with a warm process per preamble and 229 on a shared
// one (each alone), and half the wall time. TestZygoteCorpusMatchesCold
// checks that the pool and a cold run typeset the corpus alike. Closed by
// TestMain.
var sharedPool textest.SharedPool

// testEngine returns sharedPool.
func testEngine(t testing.TB) *tex.Pool { t.Helper(); return sharedPool.Get(t, testFormats(t)) }

// renderFile renders a Markdown file with images from its own folder, as
// `outprint render` does.
// outlineCorpus lists the corpus files written in Outline's dialect (its
// literal \n breaks, `***` page breaks, toggles): they are rendered with
// the metadata dialect: outline, as their users would.
var outlineCorpus = map[string]bool{"handbook.md": true, "many-pages.md": true}

func renderFile(t *testing.T, p *Pipeline, path string) (*Result, error) {
	t.Helper()
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var maxPage int
	var mu sync.Mutex
	var meta []byte
	if outlineCorpus[filepath.Base(path)] {
		meta = []byte(`{"dialect":"outline"}`)
	}
	res, err := p.Do(context.Background(), Request{
		Name: filepath.Base(path), Markdown: md, Metadata: meta,
		Images: images.Chain(images.Dir(filepath.Dir(path)), nil),
	}, func(pr Progress) {
		mu.Lock()
		defer mu.Unlock()
		if pr.Pages > maxPage {
			maxPage = pr.Pages
		}
	})
	if res != nil && maxPage > res.Pages {
		t.Errorf("progress reported page %d, PDF has %d", maxPage, res.Pages)
	}
	return res, err
}

func limitsError(t *testing.T, err error) *limits.Error {
	t.Helper()
	var le *limits.Error
	if !errors.As(err, &le) {
		t.Fatalf("error = %v, want *limits.Error", err)
	}
	return le
}

// TestShowcase renders the project's own example, which shows every
// construct, so the suite proves the pipeline without ../shared.
func TestShowcase(t *testing.T) {
	p := newPipeline(t)
	res, err := renderFile(t, p, filepath.Join(moduleRoot(), "examples", "showcase.md"))
	if err != nil {
		t.Fatalf("render showcase: %v", err)
	}
	f := inspectPDF(t, res.PDF)
	assertFontsEmbedded(t, f.Fonts)
	if res.MaxRSS <= 0 || res.CPU <= 0 {
		t.Errorf("showcase MaxRSS, CPU = %d, %v, want both measured", res.MaxRSS, res.CPU)
	}
	if f.Pages < 2 {
		t.Errorf("showcase pages = %d, want at least 2", f.Pages)
	}
	if !strings.Contains(strings.ToLower(f.Text), "page 1 of "+strconv.Itoa(f.Pages)) {
		t.Errorf("footer %q missing from showcase text", "page 1 of "+strconv.Itoa(f.Pages))
	}
}
