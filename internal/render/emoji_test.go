package render

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

// emojiDoc has a single emoji (twice, and once more by its :name:), a
// zero width joiner sequence, a flag, a skin tone and a name: five
// distinct emoji.
const emojiDoc = "# Emoji\n\nSmile 😀 and again 😀 with :grinning: then coder 👨‍💻 flag 🇩🇪 thumbs 👍🏽 party :tada: done.\n\nA second paragraph follows.\n"

// emojiChars are the characters emojiDoc's emoji must give back.
var emojiChars = []string{"😀", "👨‍💻", "🇩🇪", "👍🏽", "🎉"}

// emojiForms counts the distinct emoji images of a PDF: the Form XObjects
// with a square box at the origin (an emoji's PDF; the page total's
// XObject has another box), with qpdf.
func emojiForms(t *testing.T, path string) int {
	t.Helper()
	out, err := exec.Command("qpdf", "--json=2", "--json-key=qpdf", path).Output()
	if err != nil {
		t.Fatalf("qpdf --json %s: %v", path, err)
	}
	// The second element of "qpdf" holds the objects, the first the
	// header.
	var doc struct {
		QPDF []json.RawMessage `json:"qpdf"`
	}
	var objects map[string]struct {
		Stream struct {
			Dict struct {
				Subtype string    `json:"/Subtype"`
				BBox    []float64 `json:"/BBox"`
			} `json:"dict"`
		} `json:"stream"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc.QPDF) < 2 {
		t.Fatalf("qpdf --json %s: %v", path, err)
	}
	if err := json.Unmarshal(doc.QPDF[1], &objects); err != nil {
		t.Fatalf("qpdf --json %s: objects: %v", path, err)
	}
	n := 0
	for _, o := range objects {
		d := o.Stream.Dict
		if d.Subtype == "/Form" && len(d.BBox) == 4 && d.BBox[0] == 0 && d.BBox[1] == 0 && d.BBox[2] > 0 && d.BBox[2] == d.BBox[3] {
			n++
		}
	}
	return n
}

func renderEmoji(t *testing.T, p *Pipeline, md, meta string) string {
	t.Helper()
	res, err := p.Do(context.Background(), Request{Name: "emoji.md", Markdown: []byte(md), Metadata: []byte(meta)}, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return writePDF(t, res.PDF, "emoji.pdf")
}

// TestEmojiImages: emoji print as images of the set, one per distinct
// emoji, inline at text size on the line of their words, in both dialects;
// the text layer gives back the emoji and no Symbola is used for them.
func TestEmojiImages(t *testing.T) {
	p := newPipeline(t)
	if p.EmojiDir() == "" {
		testenv.Missing(t, "the emoji image set ("+DefaultEmojiDir+", scripts/emoji.sh)")
	}
	for _, dialect := range []string{"", `{"dialect":"outline"}`} {
		t.Run("dialect="+dialect, func(t *testing.T) {
			path := renderEmoji(t, p, emojiDoc, dialect)
			if got, want := emojiForms(t, path), len(emojiChars); got != want {
				t.Errorf("emoji images in the PDF = %d, want %d (one per distinct emoji)", got, want)
			}
			text := inspectPDFPath(t, path)
			for _, c := range emojiChars {
				if !strings.Contains(text, c) {
					t.Errorf("pdftotext lacks %q (%U):\n%s", c, []rune(c), text)
				}
			}
			if !strings.Contains(text, "Smile 😀 and again 😀 with 😀 then coder 👨‍💻 flag 🇩🇪 thumbs 👍🏽 party 🎉 done.") {
				t.Errorf("pdftotext does not give back the line as written:\n%s", text)
			}
			fonts, err := exec.Command("pdffonts", path).Output()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(fonts), "Symbola") {
				t.Errorf("pdffonts lists Symbola although every emoji has an image:\n%s", fonts)
			}
			// Each emoji's box is on its neighbours' line, about as high
			// as their letters' boxes.
			words := bboxPages(t, path)[0].words
			var smile bboxWord
			for _, w := range words {
				if w.text == "Smile" {
					smile = w
				}
			}
			if smile.text == "" {
				t.Fatalf("no word Smile in pdftotext -bbox: %v", words)
			}
			lineH := smile.yMax - smile.yMin
			for _, c := range emojiChars {
				found := false
				for _, w := range words {
					if w.text != c {
						continue
					}
					found = true
					if d := w.yMax - smile.yMax; d > 1 || d < -1 {
						t.Errorf("%s: box bottom %.1f pt, Smile's %.1f pt: not on the same line", c, w.yMax, smile.yMax)
					}
					if h := w.yMax - w.yMin; h < 0.8*lineH || h > 1.25*lineH {
						t.Errorf("%s: box %.1f pt high, the text's %.1f pt", c, h, lineH)
					}
					// An emoji is about an em wide, more than half the
					// line's height.
					if wd := w.xMax - w.xMin; wd < 0.6*lineH || wd > 1.2*lineH {
						t.Errorf("%s: box %.1f pt wide, the line %.1f pt high", c, wd, lineH)
					}
				}
				if !found {
					t.Errorf("pdftotext -bbox has no word %q", c)
				}
			}
		})
	}
}

// TestEmojiWithoutSet: without the image set emoji are the emoji font's
// outlines, as before, and the render succeeds.
func TestEmojiWithoutSet(t *testing.T) {
	testenv.Require(t, "xelatex", "rsvg-convert", "pdftotext", "pdffonts", "qpdf")
	runner, err := tex.NewRunner(tex.RunnerConfig{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Config{Engine: runner, TempDir: t.TempDir(), EmojiDir: t.TempDir()})
	if got := p.EmojiDir(); got != "" {
		t.Fatalf("EmojiDir() = %q for an empty folder, want \"\"", got)
	}
	path := renderEmoji(t, p, emojiDoc, "")
	if got := emojiForms(t, path); got != 0 {
		t.Errorf("emoji images in the PDF = %d, want 0 without a set", got)
	}
	fonts, err := exec.Command("pdffonts", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(fonts), "Symbola") {
		t.Errorf("pdffonts lacks Symbola, the fallback for emoji:\n%s", fonts)
	}
	if text := inspectPDFPath(t, path); !strings.Contains(text, "😀") {
		t.Errorf("pdftotext lacks 😀:\n%s", text)
	}
}
