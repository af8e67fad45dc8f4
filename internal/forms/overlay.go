package forms

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/script"
)

// This file typesets the values: one overlay page per form page that shows
// a value, drawn by XeLaTeX with the Markdown renderer's fonts and font
// fallback (script.SplitRuns picks a font that has each character's
// glyph, WriteRuns marks right-to-left stretches for TeX--XeT), so that a
// value in any script comes out with the right glyphs in reading order from
// embedded fonts, whatever font the form names. qpdf then lays each overlay
// page over its form page (flatten.go).
//
// Coordinates: an overlay page has the size of its form page's media box in
// unrotated user space, and everything is placed with picture's \put in
// PDF points (bp) from its lower-left corner. A widget is drawn in a box of
// its rectangle's size, turned by its /MK /R about the box's corner
// (\special{pdf:btrans rotate}): a widget rotated 90° on a page rotated 90°
// reads upright, as in a viewer.

// overlayPreamble is the preamble of an overlay document for the scripts
// its values need. It depends only on scripts, so the warm pool keeps
// processes for each set that occurs.
//
// Fonts are loaded with XeTeX's \font primitive at 10 pt, not with
// fontspec: a warm process then loads a format without fontspec and expl3
// and each font without fontspec's feature probing, which halved the TeX
// CPU of a fill in five scripts (bench/forms). Sizes come from scaling the
// set text (\scalebox), which a PDF viewer cannot tell from a font size.
func overlayPreamble(sc script.Set) string {
	var b strings.Builder
	b.WriteString(`\documentclass[10pt]{article}
\usepackage{color}
\usepackage{graphicx}
\csname endofdump\endcsname
\font\opmain="Noto Sans" at 10pt
`)
	if sc&(script.Arabic|script.Hebrew) != 0 {
		b.WriteString("\\TeXXeTstate=1\n")
	}
	for _, key := range fallbackKeys() {
		f, ok := overlayFonts[key]
		if !ok || sc&f.scripts == 0 {
			// Never used by this document's runs (ScriptsOf said so);
			// defined so that a surprise costs a glyph, not an error.
			b.WriteString("\\newcommand\\opfont" + key + "[1]{#1}\n")
			continue
		}
		b.WriteString("\\font\\opf" + key + "=\"" + f.spec + "\" at 10pt\n")
		b.WriteString("\\newcommand\\opfont" + key + "[1]{{\\opf" + key)
		if f.breakLocale != "" {
			b.WriteString("\\XeTeXlinebreaklocale \"" + f.breakLocale + "\"\\XeTeXlinebreakskip=0pt plus 1pt\\relax #1\\XeTeXlinebreaklocale \"\"\\relax}}\n")
		} else {
			b.WriteString("#1}}\n")
		}
	}
	b.WriteString(`\pagestyle{empty}
\hoffset=-1in \voffset=-1in \oddsidemargin=0pt \evensidemargin=0pt \topmargin=0pt
\headheight=0pt \headsep=0pt \footskip=0pt \topskip=0pt \parindent=0pt \parskip=0pt
\textwidth=14400bp \textheight=14400bp \maxdepth=0pt
\unitlength=1bp
\hbadness=10000 \vbadness=10000 \hfuzz=\maxdimen \vfuzz=\maxdimen
\frenchspacing
\newsavebox\opbx
% \opfit{max width}{max height}: shrink \opbx to fit (never enlarge).
\newcommand\opfit[2]{\ifdim\wd\opbx>#1\relax\sbox\opbx{\resizebox{#1}{!}{\usebox\opbx}}\fi
 \ifdim\dimexpr\ht\opbx+\dp\opbx\relax>#2\relax\sbox\opbx{\resizebox*{!}{#2}{\usebox\opbx}}\fi}
% \oppage{width}{height}: a page of that size, everything \put on it.
\newcommand\oppage[2]{\pdfpagewidth=#1bp\pdfpageheight=#2bp\noindent\begin{picture}(0,0)(0,#2)}
\newcommand\opendpage{\end{picture}\par\newpage}
% \opat{x}{y}{angle}{content}: content with its reference point at (x,y),
% turned counterclockwise by angle about it.
\newcommand\opat[4]{\put(#1,#2){\special{pdf:btrans rotate #3}\makebox[0pt][l]{#4}\special{pdf:etrans}}}
% \opfill{w}{h}: a filled rectangle in the current colour.
\newcommand\opfill[2]{\makebox[0pt][l]{\rule{#1bp}{#2bp}}}
% \opframe{w}{h}{line}: a rectangle's outline inside w×h.
\newcommand\opframe[3]{\makebox[0pt][l]{\rule{#1bp}{#3bp}}\makebox[0pt][l]{\raisebox{\dimexpr#2bp-#3bp}{\rule{#1bp}{#3bp}}}\makebox[0pt][l]{\rule{#3bp}{#2bp}}\makebox[0pt][l]{\hskip\dimexpr#1bp-#3bp\rule{#3bp}{#2bp}}}
% \opone{w}{h}{x}{baseline}{l|c|r}{scale}{text}: one line in a w×h area at x.
\newcommand\opone[7]{\sbox\opbx{\scalebox{#6}{\opmain #7}}\opfit{#1bp}{#2bp}\makebox[0pt][l]{\hskip#3bp\raisebox{#4bp}[0pt][0pt]{\makebox[#1bp][#5]{\usebox\opbx}}}}
% \opmulti{w}{h}{x}{top}{scale}{w/scale}{text}: a paragraph of width w whose
% top is at top, set at 10 pt in a width of w/scale and scaled.
\newcommand\opmulti[7]{\sbox\opbx{\scalebox{#5}{\parbox[t]{#6bp}{\opmain\baselineskip=11.6pt\relax #7}}}\opfit{#1bp}{#2bp}\makebox[0pt][l]{\hskip#3bp\raisebox{\dimexpr#4bp-\ht\opbx}[0pt][0pt]{\usebox\opbx}}}
% \opcenter{w}{h}{size}{text}: text centred both ways, at most size high.
\newcommand\opcenter[4]{\sbox\opbx{\opmain #4}\ifdim\dimexpr\ht\opbx+\dp\opbx\relax>0pt\sbox\opbx{\resizebox*{!}{#3bp}{\usebox\opbx}}\fi\opfit{#1bp}{#2bp}\makebox[0pt][l]{\raisebox{\dimexpr(#2bp-\ht\opbx+\dp\opbx)/2}[0pt][0pt]{\makebox[#1bp][c]{\usebox\opbx}}}}
`)
	return b.String()
}

// overlayItem is what one widget shows.
type overlayItem struct {
	w     *widget
	fl    *Field // nil for a push button
	text  string // text to show ("" none)
	lines bool   // text is a paragraph (multiline field, list box)
	mark  bool   // a drawn check mark or bullet instead of the form's appearance
	decor bool   // draw background and border from /MK
}

// overlayPage is an overlay page: the form page it goes on and its items.
type overlayPage struct {
	index int // 0-based form page
	items []overlayItem
}

// overlayBody writes the body of the overlay document.
func overlayBody(f *form, pages []overlayPage) string {
	var b strings.Builder
	for _, op := range pages {
		pg := f.pages[op.index]
		w, h := pg.media[2]-pg.media[0], pg.media[3]-pg.media[1]
		fmt.Fprintf(&b, "\\oppage{%s}{%s}%%\n", num(w), num(h))
		if pg.rotate != 0 {
			// qpdf turns an overlay page to match the rotation of the
			// page it goes on unless both have the same /Rotate; the
			// overlay is drawn in the page's unrotated space already.
			fmt.Fprintf(&b, "\\special{pdf:put @thispage <</Rotate %d>>}%%\n", pg.rotate)
		}
		for _, it := range op.items {
			writeItem(&b, f, pg, it)
		}
		b.WriteString("\\opendpage\n")
	}
	return b.String()
}

// writeItem writes one widget's \opat: the box turned by the widget's
// /MK /R, its background and border, then its value.
func writeItem(b *strings.Builder, f *form, pg page, it overlayItem) {
	w := it.w
	x0, y0 := w.rect[0]-pg.media[0], w.rect[1]-pg.media[1]
	rw, rh := w.rect[2]-w.rect[0], w.rect[3]-w.rect[1]
	if rw <= 0 || rh <= 0 {
		return
	}
	angle := widgetAngle(f, w)
	bw, bh, px, py := turnedBox(x0, y0, rw, rh, angle)
	var c strings.Builder
	if it.decor {
		writeDecor(&c, f, w, bw, bh)
	}
	size, color := parseDA(w.da)
	border := 0.0
	if it.decor && pdfColor(f.doc.numbers(w.mk["/BC"])) != "" {
		border = borderWidth(f, w)
	}
	pad := 2 + border
	if pad*2 >= min(bw, bh) {
		pad = min(bw, bh) / 8
	}
	if color == "" {
		color = `\color[gray]{0}`
	}
	writeValue(&c, it, itemBox{w: bw, h: bh, pad: pad, size: size, color: color})
	if c.Len() == 0 {
		return
	}
	fmt.Fprintf(b, "\\opat{%s}{%s}{%d}{%s}%%\n", num(px), num(py), angle, c.String())
}

// widgetAngle is the widget's /MK /R rounded down to a quarter turn in
// [0, 360): a form may give any multiple of 90, negative or over a turn.
func widgetAngle(f *form, w *widget) int {
	if r, ok := f.doc.number(w.mk["/R"]); ok {
		return ((int(r) % 360) + 360) % 360 / 90 * 90
	}
	return 0
}

// turnedBox is the box before turning by angle (bw×bh) and where its
// corner goes (px, py) so that the turned box covers the rw×rh rectangle
// at x0, y0.
func turnedBox(x0, y0, rw, rh float64, angle int) (bw, bh, px, py float64) {
	bw, bh = rw, rh
	px, py = x0, y0
	switch angle {
	case 90:
		bw, bh = rh, rw
		px = x0 + rw
	case 180:
		px, py = x0+rw, y0+rh
	case 270:
		bw, bh = rh, rw
		py = y0 + rh
	}
	return bw, bh, px, py
}

// borderWidth is the widget's /BS /W, 1 when it gives none (the PDF
// default).
func borderWidth(f *form, w *widget) float64 {
	if v, ok := f.doc.number(w.bs["/W"]); ok {
		return v
	}
	return 1.0
}

// writeDecor draws the widget's /MK background and border, for fields
// whose appearance is drawn anew rather than kept from the form.
func writeDecor(c *strings.Builder, f *form, w *widget, bw, bh float64) {
	if col := pdfColor(f.doc.numbers(w.mk["/BG"])); col != "" {
		fmt.Fprintf(c, "{%s\\opfill{%s}{%s}}", col, num(bw), num(bh))
	}
	if col := pdfColor(f.doc.numbers(w.mk["/BC"])); col != "" {
		if lw := borderWidth(f, w); lw > 0 {
			fmt.Fprintf(c, "{%s\\opframe{%s}{%s}{%s}}", col, num(bw), num(bh), num(lw))
		}
	}
}

// itemBox is the unturned box a value is set in: its size, the padding
// inside its border, and the font size (0: fit) and colour of /DA.
type itemBox struct {
	w, h, pad float64
	size      float64
	color     string
}

// writeValue sets an item's value in its box, in the form the field
// shows it: a check mark, a comb of cells, a paragraph or one line.
func writeValue(c *strings.Builder, it overlayItem, box itemBox) {
	switch {
	case it.mark:
		writeMark(c, it, box)
	case it.text == "":
	case it.fl != nil && it.fl.comb && !it.lines:
		writeComb(c, it, box)
	case it.lines:
		writeLines(c, it, box)
	default:
		writeOneLine(c, it, box)
	}
}

// writeMark draws a check mark or bullet centred in the box, at /DA's
// size unless that is automatic or taller than the box.
func writeMark(c *strings.Builder, it overlayItem, box itemBox) {
	bw, bh := box.w, box.h
	s := box.size
	if s == 0 || s > bh*0.8 {
		s = min(bw, bh) * 0.7
	}
	fmt.Fprintf(c, "{%s\\opcenter{%s}{%s}{%s}{%s}}", box.color, num(bw), num(bh), num(s*0.8), runs(it.text))
}

// writeComb sets a comb field's text one grapheme per cell, MaxLen cells
// across the box.
func writeComb(c *strings.Builder, it overlayItem, box itemBox) {
	bw, bh, pad, size := box.w, box.h, box.pad, box.size
	n := it.fl.MaxLen
	cell := bw / float64(n)
	if size == 0 {
		size = min(12, (bh-2*pad)/1.15, cell*1.3)
	}
	size = max(size, 1)
	by := (bh-0.72*size)/2 + 0.01
	fmt.Fprintf(c, "{%s\\makebox[0pt][l]{\\raisebox{%sbp}[0pt][0pt]{", box.color, num(by))
	for _, g := range graphemes(it.text) {
		fmt.Fprintf(c, "\\makebox[%sbp][c]{\\scalebox{%s}{\\opmain %s}}", num(cell), scale(size), runs(g))
	}
	c.WriteString("}}}")
}

// writeLines sets a multiline field's text as a paragraph, cut and sized
// to fit the box, aligned by the field's /Q.
func writeLines(c *strings.Builder, it overlayItem, box itemBox) {
	bw, bh, pad, size := box.w, box.h, box.pad, box.size
	if size == 0 {
		size = min(10, max(bh-2*pad, 1))
	}
	text := fitText(it.text, bw-2*pad, bh-2*pad, true)
	size = fitSize(text, size, bw-2*pad, bh-2*pad, true)
	align := [3]string{`\raggedright`, `\centering`, `\raggedleft`}[quad(it)]
	fmt.Fprintf(c, "{%s\\opmulti{%s}{%s}{%s}{%s}{%s}{%s}{%s\\hbadness=10000\\relax %s}}",
		box.color, num(bw-2*pad), num(bh-2*pad), num(pad), num(bh-pad), scale(size), num((bw-2*pad)*10/max(size, 0.5)), align, paragraph(text))
}

// writeOneLine sets a one-line field's text on one line, cut and sized to
// fit the box, centred vertically and aligned by the field's /Q.
func writeOneLine(c *strings.Builder, it overlayItem, box itemBox) {
	bw, bh, pad, size := box.w, box.h, box.pad, box.size
	if size == 0 {
		size = min(12, max((bh-2*pad)/1.2, 1))
	}
	text := fitText(oneLine(it.text), bw-2*pad, bh-2*pad, false)
	size = fitSize(text, size, bw-2*pad, bh-2*pad, false)
	by := (bh-0.72*size)/2 + 0.0
	fmt.Fprintf(c, "{%s\\opone{%s}{%s}{%s}{%s}{%s}{%s}{%s}}",
		box.color, num(bw-2*pad), num(bh-2*pad+0.5*size), num(pad), num(by), [3]string{"l", "c", "r"}[quad(it)],
		scale(size), runs(text))
}

// minTextSize is the smallest font size a value is set in; text that would
// need less is cut (a value of 64 KiB in a one-line field).
const minTextSize = 2.0

// fitText cuts text to what can be read in a w×h area at minTextSize, with
// an average glyph width of half the size (CJK glyphs are wider: they fit
// fewer, and TeX's own fitting shrinks them further). Besides legibility it
// keeps TeX's dimensions below their limit of 16,383 pt.
func fitText(text string, w, h float64, lines bool) string {
	perLine := max(int(w/(0.5*minTextSize)), 1)
	n := perLine
	if lines {
		n = perLine * max(int(h/(1.16*minTextSize)), 1)
	}
	r := []rune(text)
	if len(r) <= n {
		return text
	}
	return string(r[:n])
}

// fitSize lowers the font size when the text plainly cannot fit at it, so
// that TeX starts near the size it will end at (\opfit shrinks the rest).
func fitSize(text string, size, w, h float64, lines bool) float64 {
	chars := float64(len([]rune(text)))
	if chars == 0 || w <= 0 || h <= 0 {
		return size
	}
	if !lines {
		// One line: natural width about 0.55·size per character.
		if need := chars * 0.55 * size; need > 8*w {
			size = max(8*w/(chars*0.55), minTextSize)
		}
		return size
	}
	// A paragraph: lines·1.16·size high, lines = chars·0.5·size / w.
	height := func(s float64) float64 { return chars * 0.5 * s / w * 1.16 * s }
	if height(size) > 2*h {
		size = max(math.Sqrt(2*h*w/(chars*0.58)), minTextSize)
	}
	return size
}

func quad(it overlayItem) int {
	if it.fl == nil {
		return 1
	}
	if it.fl.quad >= 0 && it.fl.quad <= 2 {
		return it.fl.quad
	}
	return 0
}

// scale is the factor that makes the 10 pt fonts of the overlay size pt.
func scale(size float64) string { return num(max(size, 0.5) / 10) }

// overlayFont is a fallback font of the overlay: its XeTeX font spec and the
// script group that loads it.
type overlayFont struct {
	spec        string
	scripts     script.Set
	breakLocale string
}

// overlayFonts are the fonts of script's fallback chain (the keys its
// SplitRuns returns), as XeTeX \font specs: the same families, the script
// for HarfBuzz where script gives fontspec Script=. Arabic is tex's
// copy of Noto Naskh Arabic, by file name, as in script: its text layer
// copies as letters.
var overlayFonts = map[string]overlayFont{
	"cjk":        {spec: "Noto Serif CJK JP", scripts: script.CJK, breakLocale: "ja"},
	"arabic":     {spec: "[OutprintNaskhArabic-Regular.ttf]:script=arab", scripts: script.Arabic},
	"hebrew":     {spec: "Noto Sans Hebrew:script=hebr", scripts: script.Hebrew},
	"devanagari": {spec: "Noto Sans Devanagari:script=dev2", scripts: script.Devanagari},
	"thai":       {spec: "Noto Sans Thai:script=thai", scripts: script.Thai, breakLocale: "th"},
	"math":       {spec: "Noto Sans Math", scripts: script.Symbols},
	"symbols":    {spec: "Noto Sans Symbols", scripts: script.Symbols},
	"symbolstwo": {spec: "Noto Sans Symbols2", scripts: script.Symbols},
	"emoji":      {spec: "Symbola", scripts: script.Emoji},
	// Korean is the CJK font without ICU's break-anywhere locale: it
	// breaks between words, at spaces.
	"korean":    {spec: "Noto Serif CJK JP", scripts: script.CJK},
	"bengali":   {spec: "Noto Serif Bengali:script=bng2", scripts: script.Indic},
	"tamil":     {spec: "Noto Serif Tamil:script=tml2", scripts: script.Indic},
	"malayalam": {spec: "Noto Serif Malayalam:script=mlm2", scripts: script.Indic},
	"kannada":   {spec: "Noto Serif Kannada:script=knd2", scripts: script.Indic},
	"telugu":    {spec: "Noto Serif Telugu:script=tel2", scripts: script.Indic},
	"gujarati":  {spec: "Noto Serif Gujarati:script=gjr2", scripts: script.Indic},
	"gurmukhi":  {spec: "Noto Serif Gurmukhi:script=gur2", scripts: script.Indic},
	"oriya":     {spec: "Noto Sans Oriya:script=ory2", scripts: script.Indic},
	"sinhala":   {spec: "Noto Serif Sinhala:script=sinh", scripts: script.Indic},
	"khmer":     {spec: "Noto Serif Khmer:script=khmr", scripts: script.World, breakLocale: "km"},
	"lao":       {spec: "Noto Serif Lao:script=lao", scripts: script.World, breakLocale: "lo"},
	"myanmar":   {spec: "Noto Serif Myanmar:script=mym2", scripts: script.World, breakLocale: "my"},
	"tibetan":   {spec: "Noto Serif Tibetan:script=tibt", scripts: script.World},
	"georgian":  {spec: "Noto Serif Georgian:script=geor", scripts: script.World},
	"armenian":  {spec: "Noto Serif Armenian:script=armn", scripts: script.World},
	"ethiopic":  {spec: "Noto Serif Ethiopic:script=ethi", scripts: script.World},
}

// fallbackKeys are the font keys script's runs use, from its vocabulary.
func fallbackKeys() []string {
	var keys []string
	for _, m := range script.FontMacros() {
		if k, ok := strings.CutPrefix(m, `\opfont`); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// num writes a length in bp for TeX: a plain decimal, at most 3 places.
func num(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "0"
	}
	f = max(min(f, 16000), -16000)
	return strconv.FormatFloat(math.Round(f*1000)/1000, 'f', -1, 64)
}

var daSize = regexp.MustCompile(`(?:^|\s)(-?[0-9.]+)\s+Tf\b`)
var daColor = regexp.MustCompile(`(?:^|\s)((?:-?[0-9.]+\s+){1,4})(g|rg|k)(?:\s|$)`)

// parseDA reads the font size (0: automatic) and the text colour of a
// default appearance string ("/Helv 12 Tf 0 g"). The font is ignored on
// purpose: the form's font rarely has the glyphs of every script.
func parseDA(da string) (size float64, color string) {
	if m := daSize.FindStringSubmatch(da); m != nil {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil && v > 0 && v < 1000 {
			size = v
		}
	}
	if m := daColor.FindAllStringSubmatch(da, -1); m != nil {
		last := m[len(m)-1]
		var comps []float64
		for _, s := range strings.Fields(last[1]) {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return size, ""
			}
			comps = append(comps, v)
		}
		want := map[string]int{"g": 1, "rg": 3, "k": 4}[last[2]]
		if len(comps) >= want {
			color = pdfColor(comps[len(comps)-want:])
		}
	}
	return size, color
}

// pdfColor is the \color command for a PDF colour array (gray, RGB or
// CMYK), "" for none (transparent).
func pdfColor(c []float64) string {
	clamp := func(v float64) string { return num(max(0, min(1, v))) }
	switch len(c) {
	case 1:
		return `\color[gray]{` + clamp(c[0]) + `}`
	case 3:
		return `\color[rgb]{` + clamp(c[0]) + "," + clamp(c[1]) + "," + clamp(c[2]) + `}`
	case 4:
		return `\color[cmyk]{` + clamp(c[0]) + "," + clamp(c[1]) + "," + clamp(c[2]) + "," + clamp(c[3]) + `}`
	}
	return ""
}

// runs is s as LaTeX: every character in a font that has it, right-to-left
// stretches marked, every TeX special character escaped. User text never
// becomes a TeX command.
func runs(s string) string {
	var b strings.Builder
	script.WriteRuns(&b, script.SplitRuns(s), texEscape)
	return b.String()
}

// paragraph is a multiline value: its lines as TeX paragraphs.
func paragraph(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = runs(l) + `\strut`
	}
	return strings.Join(lines, "\\par ")
}

// oneLine is a value for a single-line field: line breaks become spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
}

// graphemes splits s for the cells of a comb field: a base character with
// the marks that follow it.
func graphemes(s string) []string {
	var out []string
	for _, r := range s {
		if len(out) > 0 && (unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) || r == 0x200D || r == 0xFE0F || endsWithVirama(out[len(out)-1])) {
			out[len(out)-1] += string(r)
			continue
		}
		out = append(out, string(r))
	}
	return out
}

// endsWithVirama reports whether s ends with a virama (halant), which joins
// the next consonant into the same cluster (Devanagari स्ते is one cell).
func endsWithVirama(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	switch r {
	case 0x094D, 0x09CD, 0x0A4D, 0x0ACD, 0x0B4D, 0x0BCD, 0x0C4D, 0x0CCD, 0x0D4D, 0x0DCA, 0x1039, 0x17D2:
		return true
	}
	return false
}

// texEscape escapes the characters TeX treats specially and drops control
// characters.
func texEscape(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch r {
		case '\\', '{', '}', '$', '&', '#', '_', '%', '^', '~':
			// The character itself from the current (raw XeTeX) font.
			fmt.Fprintf(&b, `{\char"%X}`, r)
		case '-', '\'', '`', ',', '<', '>', '!', '?':
			// No TeX ligatures (--, ``, !`): the value prints as typed.
			b.WriteRune(r)
			if i+1 < len(s) {
				b.WriteString("{}")
			}
		default:
			if r < 0x20 || r == 0x7F || r == unicode.ReplacementChar {
				if r == '\t' || r == '\n' {
					b.WriteByte(' ')
				}
				continue
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// zapfMarks maps the ZapfDingbats caption characters of /MK /CA that forms
// use for check boxes and radio buttons to Unicode.
var zapfMarks = map[string]string{
	"4": "✔", "8": "✖", "l": "●", "u": "◆", "n": "■", "H": "★", "3": "✓", "6": "✗", "7": "✘",
}
