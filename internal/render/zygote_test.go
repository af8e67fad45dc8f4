package render

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

// forkCounter is the pool as a render's Engine, counting the TeX runs
// that zygotes' children typeset.
type forkCounter struct {
	pool   *tex.Pool
	forked atomic.Int64
}

func (f *forkCounter) Run(ctx context.Context, job tex.Job) (*tex.Result, error) {
	res, err := f.pool.Run(ctx, job)
	if res != nil {
		f.forked.Add(int64(res.Forked))
	}
	return res, err
}

// TestZygoteCorpusMatchesCold: every corpus document typeset by a child
// of the pool's zygote is the cold render's: text, pages, bookmarks, fonts.
func TestZygoteCorpusMatchesCold(t *testing.T) {
	dir := corpusDir(t)
	testenv.Require(t, "gcc")
	cold := newColdPipeline(t)
	signals := &tex.PoolSignals{}
	signals.Init(t)
	pool, err := tex.NewPool(tex.PoolConfig{Max: 2, Runner: tex.RunnerConfig{TempDir: t.TempDir()}, Signals: signals, Formats: testFormats(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pool.Close(context.Background()) }()
	engine := &forkCounter{pool: pool}
	warm := New(Config{Engine: engine, TempDir: t.TempDir()})
	for _, name := range []string{"memo.md", "handbook.md", "tables.md", "multilingual.md"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			want, err := renderFile(t, cold, path)
			if err != nil {
				t.Fatalf("cold render: %v", err)
			}
			// A profile's first render starts its zygote; the render
			// compared is one a zygote's child typeset.
			var got *Result
			for try := 0; try < 6 && got == nil; try++ {
				engine.forked.Store(0)
				res, err := renderFile(t, warm, path)
				if err != nil {
					t.Fatalf("warm render: %v", err)
				}
				if engine.forked.Load() > 0 {
					got = res
					break
				}
				// The profile's zygote warms beside the render that asked
				// for it.
				if pool.Stats().Zygotes == 0 {
					signals.ZygoteWarmed.Wait(testenv.WaitTimeout)
				}
			}
			if got == nil {
				t.Fatalf("no render of %s was forked from a zygote: %+v", name, pool.Stats())
			}
			w, c := inspectPDF(t, got.PDF), inspectPDF(t, want.PDF)
			if w.Pages != c.Pages || w.PageSize != c.PageSize {
				t.Errorf("pages: zygote %d (%s), cold %d (%s)", w.Pages, w.PageSize, c.Pages, c.PageSize)
			}
			if w.Text != c.Text {
				t.Errorf("text differs:\nzygote: %.300q\ncold:   %.300q", w.Text, c.Text)
			}
			if fw, fc := fontNames(w.Fonts), fontNames(c.Fonts); fw != fc {
				t.Errorf("fonts differ:\nzygote: %s\ncold:   %s", fw, fc)
			}
			if bw, bc := bookmarks(t, got.PDF), bookmarks(t, want.PDF); bw != bc {
				t.Errorf("bookmarks differ:\nzygote: %s\ncold:   %s", bw, bc)
			}
		})
	}
}

// fontNames are pdffonts' font names without the subset tags, which
// differ from run to run.
func fontNames(fonts string) string {
	return regexp.MustCompile(`(?m)^[A-Z]{6}\+`).ReplaceAllString(fonts, "")
}

// bookmarks are the PDF's outline titles, read by qpdf.
func bookmarks(t *testing.T, pdf []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "o.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("qpdf", "--json", "--json-key=outlines", path).Output()
	if err != nil {
		t.Fatalf("qpdf --json: %v", err)
	}
	var doc struct {
		Outlines []struct {
			Title string `json:"title"`
		} `json:"outlines"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("qpdf json: %v", err)
	}
	var titles []string
	for _, o := range doc.Outlines {
		titles = append(titles, o.Title)
	}
	return strings.Join(titles, " | ")
}
