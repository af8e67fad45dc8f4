package render

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

// hyphenBreak is a word broken at a line end: its letters before and
// after the hyphen.
type hyphenBreak struct{ before, after string }

// lineEndHyphens returns the words that pdftotext -bbox shows broken at a
// line end: a line's last word ends in "-" and the next line's first word
// continues it.
func lineEndHyphens(pages []pageBox) []hyphenBreak {
	var out []hyphenBreak
	for _, p := range pages {
		for i := 0; i+1 < len(p.words); i++ {
			w, next := p.words[i], p.words[i+1]
			if sameLine(w, next) || !strings.HasSuffix(w.text, "-") || len(w.text) < 3 {
				continue
			}
			after := strings.TrimRightFunc(next.text, func(r rune) bool { return !unicode.IsLetter(r) })
			out = append(out, hyphenBreak{strings.TrimSuffix(w.text, "-"), after})
		}
	}
	return out
}

// syllables maps each word of the test paragraphs to its hyphenation
// points in the language's dictionary spelling ("Ge-schwin-dig-keit").
func syllables(words ...string) map[string][]string {
	m := map[string][]string{}
	for _, w := range words {
		m[strings.ReplaceAll(w, "-", "")] = strings.Split(w, "-")
	}
	return m
}

// validBreak reports whether b splits a word of dict at one of its
// hyphenation points.
func validBreak(dict map[string][]string, b hyphenBreak) bool {
	parts, ok := dict[b.before+b.after]
	if !ok {
		return false
	}
	for i := 1; i < len(parts); i++ {
		if strings.Join(parts[:i], "") == b.before {
			return true
		}
	}
	return false
}

// TestHyphenationLanguage: a German and a French paragraph of long words
// hyphenate at line ends, each break at one of the word's dictionary
// hyphenation points, and with the language's own patterns (the breaks
// differ from English's for the same text); a language without patterns
// renders, hyphenated as English.
func TestHyphenationLanguage(t *testing.T) {
	p := newPipeline(t)
	render := func(t *testing.T, lang, text string) []hyphenBreak {
		t.Helper()
		md := "---\nlanguage: " + lang + "\n---\n\n" + text + "\n"
		res, err := p.Do(t.Context(), Request{Name: "hyph.md", Markdown: []byte(md)}, nil)
		if err != nil {
			t.Fatalf("render (language %s): %v", lang, err)
		}
		return lineEndHyphens(bboxPages(t, writePDF(t, res.PDF, "hyph.pdf")))
	}
	for _, c := range []struct {
		lang  string
		words []string
	}{
		// Words whose German (French) hyphenation points English patterns
		// mostly miss: Ar-beit-sun…, Eisen-bah-nge…, Rechtss-chutz…;
		// re-spon-s-abil-ités, par-ti-c-ulière-ment.
		{"de", []string{
			"Ar-beits-un-fä-hig-keits-be-schei-ni-gung", "Ent-wick-lungs-um-ge-bung", "Un-ter-neh-mens-be-ra-tung",
			"Ei-sen-bahn-ge-sell-schaft", "Rechts-schutz-ver-si-che-rung", "Wahr-schein-lich-keits-rech-nung",
			"Gleich-be-rech-ti-gung", "Ver-ant-wor-tungs-be-wusst-sein", "Zu-sam-men-ge-hö-rig-keits-ge-fühl",
			"Be-zirks-schorn-stein-fe-ger-meis-ter", "Hoch-ge-schwin-dig-keits-zug", "Freund-schafts-be-zie-hun-gen",
			"Nah-rungs-mit-tel-un-ver-träg-lich-keit", "Ver-si-che-rungs-ge-sell-schaft",
		}},
		{"fr", []string{
			"an-ti-cons-ti-tu-tion-nel-le-ment", "ex-tra-or-di-nai-re-ment", "in-com-pré-hen-si-bi-li-té",
			"par-ti-cu-liè-re-ment", "in-ter-na-tio-na-li-sa-tion", "res-pon-sa-bi-li-tés", "dé-ve-lop-pe-ment",
			"gou-ver-ne-men-tales", "ad-mi-nis-tra-tives", "cor-res-pon-dances", "ren-sei-gne-ments",
			"é-ta-blis-se-ments", "ca-rac-té-ris-tiques", "té-lé-com-mu-ni-ca-tions", "per-fec-tion-ne-ment",
		}},
	} {
		t.Run(c.lang, func(t *testing.T) {
			dict := syllables(c.words...)
			var text []string
			for i := range 8 {
				for j := range c.words {
					text = append(text, strings.ReplaceAll(c.words[(i*5+j)%len(c.words)], "-", ""))
				}
			}
			para := strings.Join(text, " ")
			got := render(t, c.lang, para)
			if len(got) < 3 {
				t.Fatalf("%d words hyphenated at line ends, want several: %v", len(got), got)
			}
			for _, b := range got {
				if !validBreak(dict, b) {
					t.Errorf("%s-%s: not a hyphenation point of the word in %s", b.before, b.after, c.lang)
				}
			}
			en := render(t, "en", para)
			if slices.Equal(en, got) {
				t.Errorf("language %s breaks the paragraph as English does: %v", c.lang, got)
			}
			wrong := 0
			for _, b := range en {
				if !validBreak(dict, b) {
					wrong++
				}
			}
			t.Logf("%s: %d breaks, all valid; the same text in English: %d breaks, %d not valid in %s", c.lang, len(got), len(en), wrong, c.lang)
		})
	}
	t.Run("unknown language", func(t *testing.T) {
		para := strings.Repeat("Incomprehensibilities notwithstanding, characteristically institutionalised responsibilities reappear. ", 8)
		got, en := render(t, "tlh", para), render(t, "en", para)
		if len(en) == 0 || !slices.Equal(got, en) {
			t.Errorf("language tlh hyphenates %v, want English's %v", got, en)
		}
	})
}
