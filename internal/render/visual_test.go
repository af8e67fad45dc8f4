package render

import (
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// The visual regression suite: every document of ../shared/corpus, of
// examples/ and of testdata/visual/docs/ is rendered, each page
// rasterized with pdftoppm at low resolution in grey, and compared with
// the approved page under testdata/visual/. A page that changed beyond a
// perceptual tolerance fails the test and leaves a side-by-side image
// (approved | new | difference) under testdata/visual/diff/.
//
//	make visual           # compare
//	make visual-approve   # take the new pages as approved
var approve = flag.Bool("approve", false, "TestVisual: write the rendered pages as the approved ones")

const (
	visualDPI = 30
	// A pixel differs when its grey level, after a 3×3 blur on both
	// sides, moves by more than pixelTolerance of 255; a page changed when
	// more than pageTolerance of its pixels differ. The blur forgives
	// antialiasing and sub-pixel shifts; a moved line or word does not.
	pixelTolerance = 40
	pageTolerance  = 0.002
)

// visualDocs lists the documents of the suite: name (for the PNG files)
// and path.
func visualDocs(t *testing.T) map[string]string {
	docs := map[string]string{}
	add := func(prefix, dir string) {
		files, err := filepath.Glob(filepath.Join(dir, "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			docs[prefix+"-"+strings.TrimSuffix(filepath.Base(f), ".md")] = f
		}
	}
	add("corpus", corpusDir(t))
	add("examples", filepath.Join(moduleRoot(), "examples"))
	add("own", filepath.Join(moduleRoot(), "testdata", "visual", "docs"))
	return docs
}

func TestVisual(t *testing.T) {
	testenv.Require(t, "pdftoppm")
	// With diagrams drawn, as the service draws them (examples/diagrams.md).
	p := newSharedDiagramPipeline(t)
	dir := filepath.Join(moduleRoot(), "testdata", "visual")
	diffDir := filepath.Join(dir, "diff")
	if err := os.RemoveAll(diffDir); err != nil {
		t.Fatal(err)
	}
	docs := visualDocs(t)
	names := make([]string, 0, len(docs))
	for name := range docs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			res, err := renderFile(t, p, docs[name])
			if err != nil {
				t.Fatalf("render %s: %v", docs[name], err)
			}
			pages := rasterize(t, res.PDF)
			approved, _ := filepath.Glob(filepath.Join(dir, name+"-p*.png"))
			if *approve {
				for _, f := range approved {
					// A page left over from a longer approval would be
					// compared against forever.
					if err := os.Remove(f); err != nil {
						t.Fatal(err)
					}
				}
				for i, img := range pages {
					writePNG(t, filepath.Join(dir, fmt.Sprintf("%s-p%02d.png", name, i+1)), img)
				}
				return
			}
			if len(approved) == 0 {
				t.Fatalf("no approved pages for %s: run make visual-approve and look at them", name)
			}
			if len(approved) != len(pages) {
				t.Errorf("%s has %d pages, %d approved", name, len(pages), len(approved))
			}
			for i, img := range pages {
				path := filepath.Join(dir, fmt.Sprintf("%s-p%02d.png", name, i+1))
				old, err := readGray(path)
				if err != nil {
					continue // counted above
				}
				if frac := changed(old, img); frac > pageTolerance {
					out := filepath.Join(diffDir, fmt.Sprintf("%s-p%02d.png", name, i+1))
					if err := os.MkdirAll(diffDir, 0o755); err != nil {
						t.Fatal(err)
					}
					writePNG(t, out, sideBySide(old, img))
					t.Errorf("page %d changed (%.2f %% of pixels): see %s", i+1, frac*100, out)
				}
			}
		})
	}
}

// rasterize returns the pages of a PDF in grey at visualDPI.
func rasterize(t *testing.T, pdf []byte) []*image.Gray {
	t.Helper()
	tmp := t.TempDir()
	in := filepath.Join(tmp, "doc.pdf")
	if err := os.WriteFile(in, pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("pdftoppm", "-png", "-gray", "-r", strconv.Itoa(visualDPI), in, filepath.Join(tmp, "p")).CombinedOutput(); err != nil {
		t.Fatalf("pdftoppm: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(tmp, "p-*.png"))
	sort.Slice(files, func(i, j int) bool { // p-1, p-2, … p-10: by number
		a, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(files[i]), "p-"), ".png"))
		b, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(files[j]), "p-"), ".png"))
		return a < b
	})
	var pages []*image.Gray
	for _, f := range files {
		img, err := readGray(f)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, img)
	}
	return pages
}

func readGray(path string) (*image.Gray, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	g := image.NewGray(img.Bounds())
	draw.Draw(g, g.Bounds(), img, img.Bounds().Min, draw.Src)
	return g, nil
}

func writePNG(t *testing.T, path string, img image.Image) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// blurred returns the 3×3 box-blurred grey level at x, y (white outside).
func blurred(g *image.Gray, x, y int) int {
	sum := 0
	for dy := -1; dy <= 1; dy++ {
		for dx := -1; dx <= 1; dx++ {
			p := image.Pt(x+dx, y+dy)
			if p.In(g.Rect) {
				sum += int(g.GrayAt(p.X, p.Y).Y)
			} else {
				sum += 255
			}
		}
	}
	return sum / 9
}

// changed returns the fraction of pixels that differ between two pages
// (a page of another size differs everywhere).
func changed(a, b *image.Gray) float64 {
	if a.Rect != b.Rect {
		return 1
	}
	n := 0
	for y := a.Rect.Min.Y; y < a.Rect.Max.Y; y++ {
		for x := a.Rect.Min.X; x < a.Rect.Max.X; x++ {
			if d := blurred(a, x, y) - blurred(b, x, y); d > pixelTolerance || -d > pixelTolerance {
				n++
			}
		}
	}
	return float64(n) / float64(a.Rect.Dx()*a.Rect.Dy())
}

// sideBySide returns approved | new | difference, the difference black
// where the pages differ.
func sideBySide(a, b *image.Gray) *image.Gray {
	w, h := max(a.Rect.Dx(), b.Rect.Dx()), max(a.Rect.Dy(), b.Rect.Dy())
	out := image.NewGray(image.Rect(0, 0, 3*w+8, h))
	draw.Draw(out, out.Rect, image.NewUniform(color.Gray{Y: 160}), image.Point{}, draw.Src)
	draw.Draw(out, image.Rect(0, 0, a.Rect.Dx(), a.Rect.Dy()), a, a.Rect.Min, draw.Src)
	draw.Draw(out, image.Rect(w+4, 0, w+4+b.Rect.Dx(), b.Rect.Dy()), b, b.Rect.Min, draw.Src)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.Gray{Y: 255}
			pa, pb := image.Pt(x+a.Rect.Min.X, y+a.Rect.Min.Y), image.Pt(x+b.Rect.Min.X, y+b.Rect.Min.Y)
			if !pa.In(a.Rect) || !pb.In(b.Rect) {
				c.Y = 0
			} else if d := blurred(a, pa.X, pa.Y) - blurred(b, pb.X, pb.Y); d > pixelTolerance || -d > pixelTolerance {
				c.Y = 0
			}
			out.SetGray(2*w+8+x, y, c)
		}
	}
	return out
}
