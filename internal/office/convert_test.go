package office

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// TestConvertCorpus converts every ordinary document of the corpus (and
// the hostile ones that are to convert: macros, links, OLE) once on the
// two-slot pool, all at once: each must give a PDF that poppler reads,
// with the document's words, and about the pages LibreOffice gives when
// run alone the naive way (soffice --convert-to pdf, started for the
// batch while the pool works).
// clippedByLibreOffice are the files of the corpus of which LibreOffice
// leaves out more than half of the expected words, run alone as well as
// in the pool, and why. For them TestConvertCorpus still requires every
// word that soffice --convert-to prints.
var clippedByLibreOffice = map[string]string{
	// The slide's text box overflows its top; LibreOffice 7.4 (the full
	// packages) anchors it at the bottom and the first lines fall above
	// the page: Footnote, Bold, italic, underline, Bullet, numbered.
	"ppt97-various.ppt": "text box above the slide",
}

func TestConvertCorpus(t *testing.T) {
	p := mainPool(t)
	expect := loadExpect(t)
	var names []string
	files := map[string][]byte{}
	for name, e := range expect {
		if e.Hostile != nil && (*e.Hostile == "encrypted" || *e.Hostile == "corrupt" || *e.Hostile == "bomb" || strings.Contains(name, "xxe")) {
			continue // refused by Detect: TestDetectCorpus
		}
		names = append(names, name)
		files[name] = readCorpus(t, name)
	}
	sort.Strings(names)
	if len(names) < 30 {
		t.Fatalf("only %d convertible files in the corpus, want at least 30", len(names))
	}
	// The naive run, for the page counts, while the pool converts.
	var naive map[string][]byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		naive = naiveConvert(t, files)
	}()
	pages := map[string]int{}
	texts := map[string]string{}
	var mu sync.Mutex
	t.Run("each", func(t *testing.T) {
		for _, name := range names {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := expect[name]
				f, err := Detect(files[name], name)
				if err != nil {
					t.Fatalf("Detect(%s) = %v, want %s", name, err, e.Kind)
				}
				if f.Name != e.Kind {
					t.Errorf("Detect(%s) = %s, want %s", name, f.Name, e.Kind)
				}
				// A bound against a hang, not a time to meet: LibreOffice
				// runs at nice 10, and beside the whole suite under -race
				// a 35-slide presentation once took over two minutes.
				ctx, cancel := context.WithTimeout(context.Background(), 3*testenv.WaitTimeout)
				defer cancel()
				pdf, err := p.Convert(ctx, files[name], f, Options{})
				if err != nil {
					t.Fatalf("Convert(%s) = %v, want a PDF", name, err)
				}
				text := pdfText(t, pdf)
				if name == "word-libreoffice-comments-changes.docx" && strings.Contains(text, "This is hidden text") {
					t.Errorf("Convert(%s) printed the hidden text", name)
				}
				mu.Lock()
				pages[name], texts[name] = pdfPages(t, pdf), text
				mu.Unlock()
			})
		}
	})
	wg.Wait()
	for _, name := range names {
		got, ok := pages[name]
		if !ok {
			continue // failed above
		}
		b, ok := naive[name]
		if !ok {
			t.Errorf("naive soffice --convert-to pdf gave no PDF for %s (ours has %d pages)", name, got)
			continue
		}
		want := pdfPages(t, b)
		if d := got - want; d*d > max(1, want*want/100) { // within 10%, or one page
			t.Errorf("Convert(%s) has %d pages, naive soffice %d", name, got, want)
		}
		// Every word is in the text, but for those that LibreOffice
		// alone does not print either (a slide it leaves out) or that
		// pdftotext splits (right to left, CJK, a word broken at a
		// line's end): at most half of the words, each missing from
		// the naive PDF too.
		naiveText := pdfText(t, b)
		var missing, ours []string
		for _, w := range expect[name].Words {
			if strings.Contains(texts[name], normalize(w)) {
				continue
			}
			missing = append(missing, w)
			if strings.Contains(naiveText, normalize(w)) {
				ours = append(ours, w)
			}
		}
		_, clipped := clippedByLibreOffice[name]
		if len(ours) > 0 || len(missing)*2 > len(expect[name].Words) && !clipped {
			t.Errorf("Convert(%s): pdftotext lacks %q (of %d words; %q are in the naive PDF); text starts %.300q",
				name, missing, len(expect[name].Words), ours, texts[name])
		}
		t.Logf("%-42s %3d pages (naive %d), words missing in both: %q", name, got, want, missing)
	}
	checkGroups(t, p)
}

// TestOptions: the paper and orientation overrides reach the PDF of a
// text document and of a spreadsheet.
func TestOptions(t *testing.T) {
	p := mainPool(t)
	yes, no := true, false
	for _, tc := range []struct {
		file string
		o    Options
		want string // pdfinfo's Page size
	}{
		{"word-google-docs.docx", Options{}, "612 x 792 pts (letter)"},
		{"word-google-docs.docx", Options{Paper: "a4"}, "595.304 x 841.89 pts (A4)"},
		{"word-google-docs.docx", Options{Paper: "a4", Landscape: &yes}, "841.89 x 595.304 pts (A4)"},
		{"ods-libreoffice-3sheets.ods", Options{Paper: "letter", Landscape: &no}, "612 x 792 pts (letter)"},
		{"ods-libreoffice-3sheets.ods", Options{Paper: "letter", Landscape: &yes}, "792 x 612 pts (letter)"},
	} {
		b := readCorpus(t, tc.file)
		f, err := Detect(b, tc.file)
		if err != nil {
			t.Fatal(err)
		}
		pdf, err := p.Convert(context.Background(), b, f, tc.o)
		if err != nil {
			t.Fatalf("Convert(%s, %+v) = %v", tc.file, tc.o, err)
		}
		if got := pdfinfoField(t, pdf, "Page size"); got != tc.want {
			t.Errorf("Convert(%s, paper %q landscape %v): page size %q, want %q", tc.file, tc.o.Paper, tc.o.Landscape, got, tc.want)
		}
	}
}
