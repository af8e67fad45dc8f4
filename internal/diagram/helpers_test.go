package diagram

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// testBundle is what a test of the package works with.
type testBundle struct {
	d   *Drawer
	ctx context.Context
}

// setup returns a Drawer on cfg that is closed when the test ends, after
// checking that its tools are here: Chromium, the Mermaid bundle, dot,
// prlimit and poppler's tools that check the PDFs.
func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	requireTools(t, cfg)
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() }) // tests that care about Close check it themselves
	return &testBundle{d: d, ctx: context.Background()}
}

// requireTools checks that the tools of a Drawer on cfg are here.
func requireTools(t *testing.T, cfg Config) {
	t.Helper()
	testenv.Require(t, "dot", "prlimit", "qpdf", "pdftotext", "pdfimages", "pdffonts", "pdfinfo")
	if _, err := findChromium(cfg.Chromium); err != nil {
		testenv.Missing(t, "chromium is not installed (run scripts/setup.sh)")
	}
	if cfg.MermaidDir == "" {
		if _, err := os.Stat(filepath.Join(DefaultMermaidDir, "mermaid.min.js")); err != nil {
			testenv.Missing(t, "mermaid is not installed (run scripts/mermaid.sh)")
		}
	}
}

// sharedDrawer is the Drawer of setupShared: one warm browser for the
// tests that only need a working Drawer, instead of a Chromium started
// and Mermaid loaded for each of them (some 7.5 CPU seconds each). It has
// no cache, so each Draw reaches the browser, and an idle timeout longer
// than the tests. Made on first use, closed by TestMain.
var sharedDrawer struct {
	once sync.Once
	d    *Drawer
	err  error
}

// sharedConfig is sharedDrawer's configuration.
var sharedConfig = Config{CacheBytes: -1, IdleTimeout: time.Hour}

// setupShared returns sharedDrawer. Tests that use it look at its Stats
// only as differences, and do not close it; tests of the browser's
// start, end, replacement or count use setup.
func setupShared(t *testing.T) *testBundle {
	t.Helper()
	requireTools(t, sharedConfig)
	sharedDrawer.once.Do(func() { sharedDrawer.d, sharedDrawer.err = New(sharedConfig) })
	if sharedDrawer.err != nil {
		t.Fatal(sharedDrawer.err)
	}
	return &testBundle{d: sharedDrawer.d, ctx: context.Background()}
}

// word is one word pdftotext -bbox found, with its box in points.
type word struct {
	text                   string
	xMin, yMin, xMax, yMax float64
}

var wordRE = regexp.MustCompile(`<word xMin="([0-9.]+)" yMin="([0-9.]+)" xMax="([0-9.]+)" yMax="([0-9.]+)">([^<]*)</word>`)
var pageRE = regexp.MustCompile(`<page width="([0-9.]+)" height="([0-9.]+)">`)

// pdfWords runs pdftotext -bbox on pdf and returns its words and the page
// size.
func pdfWords(t *testing.T, pdf []byte) (words []word, w, h float64) {
	t.Helper()
	path := writeTemp(t, pdf)
	out, err := exec.Command("pdftotext", "-bbox", path, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext -bbox: %v", err)
	}
	if m := pageRE.FindSubmatch(out); m != nil {
		w, _ = strconv.ParseFloat(string(m[1]), 64)
		h, _ = strconv.ParseFloat(string(m[2]), 64)
	}
	for _, m := range wordRE.FindAllSubmatch(out, -1) {
		f := func(i int) float64 { v, _ := strconv.ParseFloat(string(m[i]), 64); return v }
		words = append(words, word{text: html.UnescapeString(string(m[5])), xMin: f(1), yMin: f(2), xMax: f(3), yMax: f(4)})
	}
	return words, w, h
}

// checkLabels fails the test for every word of labels that pdftotext does
// not find inside the page.
func checkLabels(t *testing.T, name string, pdf []byte, labels []string) {
	t.Helper()
	words, w, h := pdfWords(t, pdf)
	found := map[string]bool{}
	for _, wd := range words {
		if wd.xMin < -1 || wd.yMin < -1 || wd.xMax > w+1 || wd.yMax > h+1 {
			t.Errorf("%s: word %q at (%.0f,%.0f)-(%.0f,%.0f) is outside the %.0f×%.0f page", name, wd.text, wd.xMin, wd.yMin, wd.xMax, wd.yMax, w, h)
		}
		found[wd.text] = true
	}
	for _, l := range labels {
		for _, part := range strings.Fields(l) {
			if !found[part] {
				t.Errorf("%s: label word %q not found by pdftotext -bbox; words: %v", name, part, texts(words))
			}
		}
	}
}

func texts(ws []word) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.text)
	}
	return out
}

// rasterImages returns the rows of pdfimages -list (images of the PDF).
func rasterImages(t *testing.T, pdf []byte) []string {
	t.Helper()
	out, err := exec.Command("pdfimages", "-list", writeTemp(t, pdf)).Output()
	if err != nil {
		t.Fatalf("pdfimages -list: %v", err)
	}
	var rows []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for i := 0; sc.Scan(); i++ {
		if i >= 2 && strings.TrimSpace(sc.Text()) != "" { // two header lines
			rows = append(rows, sc.Text())
		}
	}
	return rows
}

// pdfText is pdftotext's text of pdf.
func pdfText(t *testing.T, pdf []byte) string {
	t.Helper()
	out, err := exec.Command("pdftotext", writeTemp(t, pdf), "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	return string(out)
}

// pdfFonts is pdffonts' table of pdf.
func pdfFonts(t *testing.T, pdf []byte) string {
	t.Helper()
	out, err := exec.Command("pdffonts", writeTemp(t, pdf)).Output()
	if err != nil {
		t.Fatalf("pdffonts: %v", err)
	}
	return string(out)
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "*.pdf")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// limitsError returns err as a *limits.Error, failing the test otherwise.
func limitsError(t *testing.T, err error) *limits.Error {
	t.Helper()
	var le *limits.Error
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) is not a *limits.Error", err, err)
	}
	return le
}

// readTestdata reads testdata/name.
func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// groupAlive returns the live processes of the process groups pgids.
func groupAlive(pgids []int) []int {
	var alive []int
	for _, g := range pgids {
		alive = append(alive, groupMembers(g)...)
	}
	return alive
}

// waitIdle waits until the pool has a prepared page (the one a browser
// prepares after a document), so that what follows meets a drawing rather
// than a preparation.
func waitIdle(t *testing.T, d *Drawer) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if d.Stats().Idle > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no page prepared within 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pageOf returns dr's page as a PDF of its own, cut out by qpdf: a
// document's Mermaid drawings share one PDF, a page each.
func pageOf(t *testing.T, dr Drawing) []byte {
	t.Helper()
	page := max(dr.Page, 1)
	out := filepath.Join(t.TempDir(), "page.pdf")
	cmd := exec.Command("qpdf", "--empty", "--pages", writeTemp(t, dr.PDF), strconv.Itoa(page), "--", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("qpdf: page %d: %v: %s", page, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
