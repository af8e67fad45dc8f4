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

	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/testenv"
)

// placedImage is an XObject drawn on a page (an image, or an SVG as a
// form), in points from the page's top left corner like pdftotext -bbox.
type placedImage struct {
	page                   int
	xMin, yMin, xMax, yMax float64
}

// placedImages finds where each page draws its XObjects: qpdf writes the
// content streams uncompressed, and a small interpreter follows q, Q and
// cm to the unit square each Do paints: right for image XObjects (PNG,
// JPEG), not for forms (SVG and PDF images have a BBox of their own).
// Small XObjects (the footer's page total) are left out.
func placedImages(t *testing.T, path string, pageHeight float64) []placedImage {
	t.Helper()
	testenv.Require(t, "qpdf")
	qdf := filepath.Join(t.TempDir(), "qdf.pdf")
	if out, err := exec.Command("qpdf", "--qdf", "--object-streams=disable", path, qdf).CombinedOutput(); err != nil {
		t.Fatalf("qpdf --qdf: %v\n%s", err, out)
	}
	data, err := os.ReadFile(qdf)
	if err != nil {
		t.Fatal(err)
	}
	var placed []placedImage
	page := 0
	for _, chunk := range bytes.Split(data, []byte("%% Contents for page "))[1:] {
		page++
		start := bytes.Index(chunk, []byte("stream\n"))
		end := bytes.Index(chunk, []byte("endstream"))
		if start < 0 || end < start {
			t.Fatalf("page %d: no content stream in qpdf's output", page)
		}
		for _, box := range paintedBoxes(chunk[start+len("stream\n") : end]) {
			if box[2]-box[0] < 20 || box[3]-box[1] < 20 {
				continue
			}
			placed = append(placed, placedImage{page, box[0], pageHeight - box[3], box[2], pageHeight - box[1]})
		}
	}
	return placed
}

var contentToken = regexp.MustCompile(`<[0-9A-Fa-f\s]*>|\((?:\\.|[^\\)])*\)|/[^\s/\[\]()<>]+|[-+]?(?:\d+\.?\d*|\.\d+)|[A-Za-z'"*]+|\S`)

// paintedBoxes returns the box (x0, y0, x1, y1 in PDF space) of every Do
// in a content stream.
func paintedBoxes(stream []byte) [][4]float64 {
	type matrix [6]float64
	mul := func(m, n matrix) matrix { // m then n
		return matrix{
			m[0]*n[0] + m[1]*n[2], m[0]*n[1] + m[1]*n[3],
			m[2]*n[0] + m[3]*n[2], m[2]*n[1] + m[3]*n[3],
			m[4]*n[0] + m[5]*n[2] + n[4], m[4]*n[1] + m[5]*n[3] + n[5],
		}
	}
	ctm := matrix{1, 0, 0, 1, 0, 0}
	var stack []matrix
	var nums []float64
	var boxes [][4]float64
	for _, tok := range contentToken.FindAll(stream, -1) {
		s := string(tok)
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			nums = append(nums, v)
			continue
		}
		switch s {
		case "q":
			stack = append(stack, ctm)
		case "Q":
			if len(stack) > 0 {
				ctm, stack = stack[len(stack)-1], stack[:len(stack)-1]
			}
		case "cm":
			if len(nums) >= 6 {
				var m matrix
				copy(m[:], nums[len(nums)-6:])
				ctm = mul(m, ctm)
			}
		case "Do":
			x0, y0 := ctm[4], ctm[5]
			x1, y1 := ctm[0]+ctm[2]+ctm[4], ctm[1]+ctm[3]+ctm[5]
			boxes = append(boxes, [4]float64{min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)})
		}
		if !strings.HasPrefix(s, "/") && !strings.HasPrefix(s, "<") && !strings.HasPrefix(s, "(") {
			nums = nums[:0]
		}
	}
	return boxes
}

// TestFigureSpacing: a figure keeps a paragraph's distance from the text
// above it, its caption sits close under the image, and the next
// paragraph keeps its distance from the caption (measured: image box from
// the content stream, text boxes by pdftotext -bbox).
func TestFigureSpacing(t *testing.T) {
	p := newPipeline(t)
	md := `# Figures

A paragraph before the figure, long enough to be a real paragraph of running text in a document, so that it wraps.

![Bars caption](bars.png " =480x240")

Afterwards a paragraph after the figure, long enough to be a real paragraph of running text in a document, so that it wraps.
`
	res, err := p.Do(t.Context(), Request{Name: "fig.md", Markdown: []byte(md), Images: images.Chain(images.Dir("../../examples/images"), nil)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	path := writePDF(t, res.PDF, "fig.pdf")
	pages := bboxPages(t, path)
	imgs := placedImages(t, path, pages[0].height)
	if len(imgs) != 1 {
		t.Fatalf("found %d images placed, want 1: %+v", len(imgs), imgs)
	}
	img := imgs[0]
	var above, caption, below *bboxWord
	for i, w := range pages[0].words {
		switch {
		case w.text == "wraps." && w.yMax < img.yMin:
			above = &pages[0].words[i]
		case w.text == "Bars":
			caption = &pages[0].words[i]
		case w.text == "Afterwards":
			below = &pages[0].words[i]
		}
	}
	if above == nil || caption == nil || below == nil {
		t.Fatalf("words not found around the figure: above %v, caption %v, below %v", above, caption, below)
	}
	// A paragraph gap in this layout is about 0.55em of 11 pt plus the
	// descent and ascent around it: some 8–10 pt between glyph boxes.
	for _, c := range []struct {
		what     string
		gap      float64
		min, max float64
	}{
		{"text above → image top", img.yMin - above.yMax, 5, 16},
		{"image bottom → caption top", caption.yMin - img.yMax, 2, 9},
		{"caption bottom → next paragraph top", below.yMin - caption.yMax, 7, 18},
	} {
		if c.gap < c.min || c.gap > c.max {
			t.Errorf("%s = %.1f pt, want %g–%g pt", c.what, c.gap, c.min, c.max)
		} else {
			t.Logf("%s = %.1f pt", c.what, c.gap)
		}
	}
	if caption.xMin < img.xMin || caption.xMax > img.xMax {
		t.Errorf("caption spans x %.1f–%.1f, outside the image's %.1f–%.1f", caption.xMin, caption.xMax, img.xMin, img.xMax)
	}
}

// TestHalfWidthImages: an image with Outline's right-50 (left-50) before a
// paragraph is set at half width at the right (left), the paragraph's
// first lines run beside it on the same band, no word touches the image,
// and below it the text takes the full line again.
func TestHalfWidthImages(t *testing.T) {
	p := newPipeline(t)
	long := strings.Repeat("Words beside the image fill the free half of the line, and after the image the text continues at the full width again. ", 6)
	for _, side := range []string{"right", "left"} {
		t.Run(side, func(t *testing.T) {
			md := "# Beside\n\nA paragraph before.\n\n![Landscape caption](landscape.jpg \"" + side + "-50\")\n\n" + long + "\n"
			res, err := p.Do(t.Context(), Request{Name: "half.md", Markdown: []byte(md), Images: images.Chain(images.Dir("../../examples/images"), nil)}, nil)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			path := writePDF(t, res.PDF, "half.pdf")
			pages := bboxPages(t, path)
			imgs := placedImages(t, path, pages[0].height)
			if len(imgs) != 1 || imgs[0].page != 1 {
				t.Fatalf("found images %+v, want one on page 1", imgs)
			}
			img := imgs[0]
			textWidth := textRight - textLeft
			if w := img.xMax - img.xMin; w > textWidth/2+1 || w < textWidth/4 {
				t.Errorf("image is %.1f pt wide, want about half the text width %.1f", w, textWidth)
			}
			if side == "right" && img.xMax < textRight-2 || side == "left" && img.xMin > textLeft+2 {
				t.Errorf("image spans x %.1f–%.1f, want it at the %s edge of the text area %.1f–%.1f", img.xMin, img.xMax, side, textLeft, textRight)
			}
			beside, below := 0, 0
			for _, w := range pages[0].words {
				if w.xMax > img.xMin && w.xMin < img.xMax && w.yMax > img.yMin && w.yMin < img.yMax {
					t.Errorf("%q at x %.1f–%.1f y %.1f–%.1f overlaps the image x %.1f–%.1f y %.1f–%.1f", w.text, w.xMin, w.xMax, w.yMin, w.yMax, img.xMin, img.xMax, img.yMin, img.yMax)
				}
				switch {
				case w.yMin >= img.yMin-2 && w.yMax <= img.yMax+2 && w.text != "Landscape" && w.text != "caption":
					beside++
				case w.yMin > img.yMax+20 && (side == "right" && w.xMax > img.xMin+10 || side == "left" && w.xMin < img.xMax-10):
					below++
				}
			}
			// The image is about 13 lines tall: most of them hold text.
			if beside < 40 {
				t.Errorf("%d words beside the image, want the paragraph's first lines there (≥ 40)", beside)
			}
			if below == 0 {
				t.Errorf("no text under the image reaches into its half of the line: the paragraph does not take the full width again")
			}
		})
	}
}
