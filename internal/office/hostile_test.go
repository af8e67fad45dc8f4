package office

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// hostileDocs returns the hostile documents whose attack a test can
// observe: a macro that writes marker on load, and links, linked images
// and an external entity that point at the trap.
func hostileDocs(t *testing.T, marker string, tr *trap) map[string][]byte {
	t.Helper()
	toTrap := func(from string) func(string, []byte) []byte {
		return func(_ string, b []byte) []byte { return bytes.ReplaceAll(b, []byte(from), []byte(tr.url())) }
	}
	return map[string][]byte{
		"macro-onload.odt":     macroODT(t, marker),
		"linked-images.docx":   rewriteZip(t, readCorpus(t, "hostile-external-images-https.docx"), toTrap("https://securemedia.newjobs.com")),
		"linked-images.odt":    rewriteZip(t, readCorpus(t, "hostile-external-images-http.odt"), toTrap("http://www.open-xchange.com")),
		"external-entity.docx": rewriteZip(t, readCorpus(t, "hostile-xxe-http-entity.docx"), toTrap("http://poi.apache.org")),
	}
}

// TestHostileControl shows that the trap works: LibreOffice run the naive
// way (soffice --convert-to pdf, no namespaces, a default profile) dials
// it for the linked images. Without it, the tests below could pass for a
// trap nobody could reach. (No such control exists for the macro: in a
// hidden, headless load LibreOffice fires no document event even with
// macros allowed, so the macro test guards against a change of that.)
func TestHostileControl(t *testing.T) {
	testenv.Require(t, tools...)
	tr := startTrap(t)
	docs := hostileDocs(t, filepath.Join(t.TempDir(), "macro-ran"), tr)
	pdfs := naiveConvert(t, docs)
	if tr.dials.Load() == 0 {
		t.Errorf("naive soffice --convert-to pdf of %d documents (%d PDFs) never dialed the trap: the link tests prove nothing", len(docs), len(pdfs))
	}
}

// TestHostile converts the hostile documents on a pool in namespaces and
// on one without them (the fallback where the kernel refuses them, behind
// the profile's walls alone): the macro never runs, no link is fetched,
// encrypted, damaged and bomb files end in their answer without a hang,
// no process outlives its group, and the next conversion works.
func TestHostile(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool func(*testing.T) *Pool
	}{
		{"namespaces", mainPool},
		{"fallback", func(t *testing.T) *Pool {
			return sharedPool(t, "fallback", Config{Slots: 1, MaxConversions: 3, noIsolate: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.pool(t)
			marker := filepath.Join(t.TempDir(), "macro-ran")
			tr := startTrap(t)
			docs := hostileDocs(t, marker, tr)
			before := p.Stats()
			for _, h := range []struct {
				file   string
				doc    []byte
				format Format
				words  []string
				refuse string // a limits code that may answer instead of a PDF
			}{
				{"macro-onload.odt", docs["macro-onload.odt"], Format{"odt", FamilyText}, []string{"Canary paragraph"}, ""},
				{"hostile-macro-vba.docm", readCorpus(t, "hostile-macro-vba.docm"), Format{"docm", FamilyText}, []string{"macro", "processing"}, ""},
				{"linked-images.docx", docs["linked-images.docx"], Format{"docx", FamilyText}, []string{"Veterans", "Buffalo"}, ""},
				{"linked-images.odt", docs["linked-images.odt"], Format{"odt", FamilyText}, []string{"gelinkt", "eingebaut"}, ""},
				{"hostile-linked-image-relative.docx", readCorpus(t, "hostile-linked-image-relative.docx"), Format{"docx", FamilyText}, nil, ""},
				// Detect refuses these; Convert must hold its walls even
				// when handed them directly.
				{"external-entity.docx", docs["external-entity.docx"], Format{"docx", FamilyText}, nil, limits.CodeCorrupt},
				{"hostile-encrypted.odt", readCorpus(t, "hostile-encrypted.odt"), Format{"odt", FamilyText}, nil, limits.CodeCorrupt},
				{"hostile-encrypted-agile-pass.docx", readCorpus(t, "hostile-encrypted-agile-pass.docx"), Format{"docx", FamilyText}, nil, limits.CodeCorrupt},
				{"hostile-truncated.docx", readCorpus(t, "hostile-truncated.docx"), Format{"docx", FamilyText}, []string{"ORÇAMENTO"}, limits.CodeCorrupt},
				{"hostile-xml-entity-bomb.xlsx", readCorpus(t, "hostile-xml-entity-bomb.xlsx"), Format{"xlsx", FamilySpreadsheet}, nil, limits.CodeCorrupt},
			} {
				ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
				pdf, err := p.Convert(ctx, h.doc, h.format, Options{})
				cancel()
				if err != nil {
					if _, code := kindOf(err); h.refuse == "" || code != h.refuse {
						t.Errorf("Convert(%s) = %v, want a PDF%s", h.file, err, map[bool]string{true: " or a " + h.refuse + " refusal"}[h.refuse != ""])
					}
					t.Logf("Convert(%s): %v", h.file, err)
					continue
				}
				text := pdfText(t, pdf)
				for _, w := range h.words {
					if !strings.Contains(text, normalize(w)) {
						t.Errorf("Convert(%s): pdftotext lacks %q", h.file, w)
					}
				}
				if strings.Contains(text, "Apache POI") || strings.Contains(text, "the macro ran") {
					t.Errorf("Convert(%s) printed what an entity or a macro fetched: %.200q", h.file, text)
				}
			}
			if n := tr.dials.Load(); n != 0 {
				t.Errorf("the trap was dialed %d times", n)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("a macro ran: %s exists", marker)
			}
			checkGroups(t, p)
			// The next conversion still works.
			b, f := docxOf(t, "word-google-docs.docx")
			if pdf, err := p.Convert(context.Background(), b, f, Options{}); err != nil || pdfPages(t, pdf) != 1 {
				t.Errorf("Convert after the hostile files = %v, want a one-page PDF", err)
			}
			after := p.Stats()
			t.Logf("restarts %v, isolated %v", after.Restarts, after.Isolated)
			if tc.name == "fallback" {
				if after.Isolated {
					t.Errorf("Stats.Isolated on the pool without namespaces")
				}
				if after.Restarts[CauseConversions] <= before.Restarts[CauseConversions] {
					t.Errorf("11 conversions on a pool of MaxConversions 3 replaced no process: Restarts %v", after.Restarts)
				}
			}
		})
	}
}
