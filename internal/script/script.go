// Package script decides which font draws each character of running
// text, and which stretches of it run right to left. The Markdown writer
// and the form filler both set user text in XeTeX with it.
//
// XeTeX does no font fallback: a character the current font lacks is
// dropped and only logged ("Missing character: There is no … in font …").
// So every rune is assigned, here in Go, to a font that has its glyph,
// according to fontcoverage_gen.go, a table read from the fonts' own cmap
// tables. The main font (Noto Serif) takes Latin, Greek and Cyrillic; the
// fallback fonts below take the rest. A writer wraps each Run that is not
// in the main font as \opfont<key>{…}, and each right-to-left stretch in
// \beginR … \endR (WriteRuns); FontPreamble defines the macros.
//
// Right-to-left text follows the Unicode bidi algorithm for a paragraph
// that is left to right: Arabic and Hebrew letters, the neutrals between
// them and numbers after them form a stretch that TeX--XeT reverses;
// XeTeX itself orders the characters inside each word.
package script

//go:generate go run ./internal/gencoverage -o fontcoverage_gen.go

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Set is a set of the fallback font groups a document needs. The
// preamble loads only those (FontPreamble), so it depends on the document
// only through this small set.
type Set uint

// The font groups. Symbols covers the math, symbol and pictograph
// fonts that take characters the main font lacks (∑, ⇔, ☕); Emoji is
// the monochrome emoji font (XeTeX cannot draw colour emoji).
const (
	CJK Set = 1 << iota
	Arabic
	Hebrew
	Devanagari
	Thai
	Symbols
	Emoji
	// Indic and World are the other scripts Debian's Noto
	// fonts cover, in two groups so that a profile stays a small set:
	// the Brahmic scripts of South Asia, and the rest (South-East Asian,
	// Tibetan, Georgian, Armenian, Ethiopic).
	Indic
	World
)

// Run is a stretch of text set in one font. Font is "" for the main font,
// else the key of a fallback font ("cjk", "arabic", "hebrew", "devanagari",
// "thai", "math", "symbols", "symbolstwo", "emoji"): the writer sets the run
// as \opfont<Font>{…}. Text is not escaped for TeX.
//
// RTL marks right-to-left text: Arabic and Hebrew runs, and the neutrals
// between two such runs that their font cannot draw (the Hebrew fonts have
// no punctuation at all, the Arabic one no parentheses or quotes). A
// maximal sequence of RTL runs is one right-to-left stretch: the writer puts
// \beginR before its first run and \endR after its last (WriteRuns does
// all this). Splitting the stretch would print its words in the wrong
// order.
type Run struct {
	Text string
	Font string
	RTL  bool
}

// Font names a font of the fallback chain; Main is the document's
// main font, None no font (or none that matters).
type Font uint8

// RTL reports whether runs in f are right to left.
func (f Font) RTL() bool { return f < numFonts && fonts[f].rtl }

// The fonts of the chain, each described by fonts[f] (neutralChain and
// chainFor decide the order they are tried in). Only Main is exported:
// callers name the main font; the fallbacks are this package's choice.
const (
	Main Font = iota
	fontCJK
	fontKorean
	fontArabic
	fontHebrew
	fontDevanagari
	fontThai
	fontMath
	fontSymbols
	fontSymbolsTwo
	fontEmoji
	fontBengali
	fontTamil
	fontMalayalam
	fontKannada
	fontTelugu
	fontGujarati
	fontGurmukhi
	fontOriya
	fontSinhala
	fontKhmer
	fontLao
	fontMyanmar
	fontTibetan
	fontGeorgian
	fontArmenian
	fontEthiopic
	numFonts
)

// None marks a cluster no font can draw, or no letter at all.
const None = numFonts

// fontInfo describes one font of the chain.
type fontInfo struct {
	key     string  // Run.Font; the macro is \opfont<key> (letters only)
	set     fontSet // its bit in fontCoverage
	family  string  // family name for fontspec (a file name with options' Extension=)
	options string  // fontspec options: Script= makes HarfBuzz shape the script
	scripts Set     // the group that makes FontPreamble load it
	sans    string  // the sans serif family for sans serif text (headings), if any
	rtl     bool    // runs in this font are right to left
	// breakLocale turns on ICU line breaking inside runs of this font, for
	// scripts written without spaces between words (Chinese, Japanese,
	// Thai); without it a long run cannot break and runs off the page.
	breakLocale string
}

// fonts lists the chain. Fonts without bold or italic faces get fake ones
// so that **bold** or *italic* text keeps its glyphs instead of falling
// back to a shape fontspec does not have.
var fonts = [numFonts]fontInfo{
	Main:    {key: "", set: covMain, family: "Noto Serif"},
	fontCJK: {key: "cjk", set: covCJK, family: "Noto Serif CJK JP", options: "AutoFakeSlant=0.15", scripts: CJK, breakLocale: "ja"},
	// Korean is written with spaces between words and breaks there, not
	// between any two syllables as Chinese and Japanese do: the same font
	// without ICU line breaking.
	fontKorean: {key: "korean", set: covCJK, family: "Noto Serif CJK JP", options: "AutoFakeSlant=0.15", scripts: CJK},
	// Arabic is set in tex's copy of Noto Naskh Arabic, loaded by file
	// name (OSFONTDIR): same glyphs and shaping, a text layer that copies
	// as letters instead of presentation forms (tex/textfonts.go).
	fontArabic:     {key: "arabic", set: covArabic, family: "OutprintNaskhArabic", options: "Extension=.ttf,UprightFont=*-Regular,BoldFont=*-Bold,Script=Arabic", scripts: Arabic, rtl: true},
	fontHebrew:     {key: "hebrew", set: covHebrew, family: "Noto Serif Hebrew", sans: "Noto Sans Hebrew", options: "Script=Hebrew", scripts: Hebrew, rtl: true},
	fontDevanagari: {key: "devanagari", set: covDevanagari, family: "Noto Serif Devanagari", sans: "Noto Sans Devanagari", options: "Script=Devanagari", scripts: Devanagari},
	fontThai:       {key: "thai", set: covThai, family: "Noto Serif Thai", sans: "Noto Sans Thai", options: "Script=Thai", scripts: Thai, breakLocale: "th"},
	fontMath:       {key: "math", set: covMath, family: "Noto Sans Math", options: "AutoFakeBold=1.5,AutoFakeSlant=0.15", scripts: Symbols},
	fontSymbols:    {key: "symbols", set: covSymbols, family: "Noto Sans Symbols", options: "AutoFakeSlant=0.15", scripts: Symbols},
	fontSymbolsTwo: {key: "symbolstwo", set: covSymbolsTwo, family: "Noto Sans Symbols2", options: "AutoFakeBold=1.5,AutoFakeSlant=0.15", scripts: Symbols},
	fontEmoji:      {key: "emoji", set: covEmoji, family: "Symbola", options: "AutoFakeBold=1.5,AutoFakeSlant=0.15", scripts: Emoji},
	fontBengali:    {key: "bengali", set: covBengali, family: "Noto Serif Bengali", options: "Script=Bengali,AutoFakeSlant=0.15", scripts: Indic},
	fontTamil:      {key: "tamil", set: covTamil, family: "Noto Serif Tamil", options: "Script=Tamil,AutoFakeSlant=0.15", scripts: Indic},
	fontMalayalam:  {key: "malayalam", set: covMalayalam, family: "Noto Serif Malayalam", options: "Script=Malayalam,AutoFakeSlant=0.15", scripts: Indic},
	fontKannada:    {key: "kannada", set: covKannada, family: "Noto Serif Kannada", options: "Script=Kannada,AutoFakeSlant=0.15", scripts: Indic},
	fontTelugu:     {key: "telugu", set: covTelugu, family: "Noto Serif Telugu", options: "Script=Telugu,AutoFakeSlant=0.15", scripts: Indic},
	fontGujarati:   {key: "gujarati", set: covGujarati, family: "Noto Serif Gujarati", options: "Script=Gujarati,AutoFakeSlant=0.15", scripts: Indic},
	fontGurmukhi:   {key: "gurmukhi", set: covGurmukhi, family: "Noto Serif Gurmukhi", options: "Script=Gurmukhi,AutoFakeSlant=0.15", scripts: Indic},
	fontOriya:      {key: "oriya", set: covOriya, family: "Noto Sans Oriya", options: "Script=Oriya,AutoFakeSlant=0.15", scripts: Indic},
	fontSinhala:    {key: "sinhala", set: covSinhala, family: "Noto Serif Sinhala", options: "Script=Sinhala,AutoFakeSlant=0.15", scripts: Indic},
	fontKhmer:      {key: "khmer", set: covKhmer, family: "Noto Serif Khmer", options: "Script=Khmer,AutoFakeSlant=0.15", scripts: World, breakLocale: "km"},
	fontLao:        {key: "lao", set: covLao, family: "Noto Serif Lao", options: "Script=Lao,AutoFakeSlant=0.15", scripts: World, breakLocale: "lo"},
	fontMyanmar:    {key: "myanmar", set: covMyanmar, family: "Noto Serif Myanmar", options: "Script=Myanmar,AutoFakeSlant=0.15", scripts: World, breakLocale: "my"},
	fontTibetan:    {key: "tibetan", set: covTibetan, family: "Noto Serif Tibetan", options: "Script=Tibetan,AutoFakeSlant=0.15", scripts: World},
	fontGeorgian:   {key: "georgian", set: covGeorgian, family: "Noto Serif Georgian", options: "Script=Georgian,AutoFakeSlant=0.15", scripts: World},
	fontArmenian:   {key: "armenian", set: covArmenian, family: "Noto Serif Armenian", options: "Script=Armenian,AutoFakeSlant=0.15", scripts: World},
	fontEthiopic:   {key: "ethiopic", set: covEthiopic, family: "Noto Serif Ethiopic", options: "Script=Ethiopic,AutoFakeSlant=0.15", scripts: World},
}

// ActualText reports whether runs of the font with this key carry their
// text as /ActualText (texWriter.escRun): the left-to-right scripts whose
// shaping reorders glyphs. Right-to-left words are not wrapped: TeX--XeT
// reverses the contents of their boxes, the span's operators with them.
func ActualText(key string) bool {
	switch key {
	case "devanagari", "bengali", "tamil", "malayalam", "kannada", "telugu", "gujarati", "gurmukhi", "oriya",
		"sinhala", "khmer", "myanmar", "tibetan":
		return true
	}
	return false
}

// neutralChain is the order in which fonts are tried for a character that
// belongs to no script with its own font (punctuation, symbols, Latin):
// the main font, then the symbol fonts, then, as a last resort, the script
// fonts, which also carry a few symbols. Symbols go to the symbol fonts
// before the big CJK font so that an arrow does not pull in CJK.
var neutralChain = [...]Font{Main, fontMath, fontSymbols, fontSymbolsTwo, fontEmoji, fontCJK, fontKorean, fontArabic, fontHebrew, fontDevanagari, fontThai,
	fontBengali, fontTamil, fontMalayalam, fontKannada, fontTelugu, fontGujarati, fontGurmukhi, fontOriya, fontSinhala, fontKhmer, fontLao, fontMyanmar, fontTibetan, fontGeorgian, fontArmenian, fontEthiopic}

// maxCluster bounds the runes of one cluster (a base with its marks), so
// that a text of thousands of stacked combining marks costs linear time.
const maxCluster = 32

// cjkBlocks holds the blocks whose characters are set in the CJK font even
// though Unicode counts many of them as common to all scripts: CJK
// punctuation, fullwidth forms, radicals, enclosed and compatibility forms.
var cjkBlocks = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x2E80, Hi: 0x2FFF, Stride: 1}, // radicals, ideographic description
		{Lo: 0x3000, Hi: 0x303F, Stride: 1}, // CJK symbols and punctuation
		{Lo: 0x3040, Hi: 0x31FF, Stride: 1}, // kana, bopomofo, jamo, kanbun, strokes
		{Lo: 0x3200, Hi: 0x33FF, Stride: 1}, // enclosed CJK, CJK compatibility
		{Lo: 0xFE30, Hi: 0xFE4F, Stride: 1}, // CJK compatibility forms
		{Lo: 0xFF00, Hi: 0xFFEF, Stride: 1}, // halfwidth and fullwidth forms
	},
}

// scriptFont returns the font of the script r belongs to, or Main when
// r's script has no font of its own.
func scriptFont(r rune) Font {
	switch {
	case r < 0x0530:
		return Main // fast path: Latin, Greek, Cyrillic
	case unicode.Is(unicode.Hangul, r) && !unicode.Is(cjkBlocks, r):
		return fontKorean
	case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Bopomofo, cjkBlocks):
		return fontCJK
	case unicode.Is(unicode.Arabic, r):
		return fontArabic
	case unicode.Is(unicode.Hebrew, r):
		return fontHebrew
	case unicode.Is(unicode.Devanagari, r):
		return fontDevanagari
	case unicode.Is(unicode.Thai, r):
		return fontThai
	}
	for _, f := range otherScripts {
		if unicode.Is(f.table, r) {
			return f.font
		}
	}
	return Main
}

// otherScripts maps the scripts of the Indic and World fonts
// to them.
var otherScripts = [...]struct {
	table *unicode.RangeTable
	font  Font
}{
	{unicode.Bengali, fontBengali},
	{unicode.Tamil, fontTamil},
	{unicode.Malayalam, fontMalayalam},
	{unicode.Kannada, fontKannada},
	{unicode.Telugu, fontTelugu},
	{unicode.Gujarati, fontGujarati},
	{unicode.Gurmukhi, fontGurmukhi},
	{unicode.Oriya, fontOriya},
	{unicode.Sinhala, fontSinhala},
	{unicode.Khmer, fontKhmer},
	{unicode.Lao, fontLao},
	{unicode.Myanmar, fontMyanmar},
	{unicode.Tibetan, fontTibetan},
	{unicode.Georgian, fontGeorgian},
	{unicode.Armenian, fontArmenian},
	{unicode.Ethiopic, fontEthiopic},
}

// coverageOf returns the fonts that have a glyph for r.
func coverageOf(r rune) fontSet {
	i := sort.Search(len(fontCoverage), func(i int) bool { return fontCoverage[i].hi >= r })
	if i < len(fontCoverage) && fontCoverage[i].lo <= r {
		return fontCoverage[i].set
	}
	return 0
}

// isLineSpace reports whether r is white space that TeX reads as a space
// (or end of line) in any font, so it needs no glyph.
func isLineSpace(r rune) bool { return r == '\t' || r == '\n' || r == '\r' }

// isDropped reports whether r is removed from running text: bidirectional
// controls (TeX--XeT orders runs by \beginR/\endR, and the marks have no
// glyph in most fonts) and control characters other than line space.
func isDropped(r rune) bool {
	switch {
	case r >= 0x20 && r < 0x7F: // fast path: printable ASCII
		return false
	case r == 0x200E || r == 0x200F || r == 0x061C, // LRM, RLM, ALM
		r >= 0x202A && r <= 0x202E, // embeddings and overrides
		r >= 0x2066 && r <= 0x2069: // isolates
		return true
	case isLineSpace(r):
		return false
	}
	return unicode.IsControl(r) || r == utf8.RuneError
}

// isExtender reports whether r belongs to the cluster of the rune before
// it: combining marks, variation selectors, emoji modifiers and tags, and
// the joiners.
func isExtender(r rune) bool {
	switch {
	case r < 0x0300: // fast path: nothing attaches below the combining marks
		return false
	case r == 0x200D || r == 0x200C, // ZWJ, ZWNJ
		r >= 0xFE00 && r <= 0xFE0F,   // variation selectors
		r >= 0xE0100 && r <= 0xE01EF, // variation selectors supplement
		r >= 0x1F3FB && r <= 0x1F3FF, // emoji skin tone modifiers
		r >= 0xE0020 && r <= 0xE007F: // tags (subdivision flags)
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc)
}

// isInvisible reports whether r is a format character that may be dropped
// without a trace when no font has it (its glyph would be empty anyway).
func isInvisible(r rune) bool {
	return unicode.Is(unicode.Cf, r) || (r >= 0xFE00 && r <= 0xFE0F) || (r >= 0xE0100 && r <= 0xE01EF)
}

// cluster is a base rune with the runes that attach to it.
type cluster struct {
	runes  []rune
	font   Font
	strong bool // a letter (or CJK character): it fixes its font itself
	// rtl marks a neutral between two right-to-left runs that their font
	// cannot draw: it is set in another font but belongs to the
	// right-to-left stretch.
	rtl bool
}

// clusters splits s into clusters, dropping the characters isDropped names.
func clusters(s string) []cluster {
	// All clusters share one array of runes; each is a slice of it whose
	// capacity ends where it does, so that place can shrink it in place.
	rs := make([]rune, 0, len(s))
	for _, r := range s {
		if !isDropped(r) {
			rs = append(rs, r)
		}
	}
	out := make([]cluster, 0, len(rs))
	start := 0
	for i := 1; i <= len(rs); i++ {
		if i < len(rs) {
			r, base := rs[i], rs[start]
			attach := !isLineSpace(r) && !isLineSpace(base) && i-start < maxCluster &&
				(rs[i-1] == 0x200D || isExtender(r) || i-start == 1 && isRegionalPair(base, r))
			if attach {
				continue
			}
		}
		out = append(out, cluster{runes: rs[start:i:i]})
		start = i
	}
	return out
}

// isRegionalPair reports whether base and r are the two regional
// indicators of a flag.
func isRegionalPair(base, r rune) bool {
	isRI := func(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }
	return isRI(base) && isRI(r)
}

// place chooses the font of a cluster from chain and removes the runes
// that font lacks. It prefers a font that has every rune; failing that,
// the first that has the base, dropping the attached runes it lacks (a
// variation selector or a stray mark is not worth a missing glyph). A base
// no font has becomes U+FFFD, or vanishes if it is invisible anyway.
func place(c *cluster, chain []Font) {
	base := c.runes[0]
	if isLineSpace(base) {
		c.font = None // any font: resolved by the neighbours
		return
	}
	if len(c.runes) == 1 && base >= 0x20 && base < 0x7F && chain[0] == Main {
		c.font = Main // fast path: the main font has printable ASCII
		return
	}
	all := ^fontSet(0)
	for _, r := range c.runes {
		all &= coverageOf(r)
	}
	for _, f := range chain {
		if all&fonts[f].set != 0 {
			c.font = f
			return
		}
	}
	baseSet := coverageOf(base)
	for _, f := range chain {
		if baseSet&fonts[f].set != 0 {
			kept := c.runes[:1]
			for _, r := range c.runes[1:] {
				if coverageOf(r)&fonts[f].set != 0 {
					kept = append(kept, r)
				}
			}
			c.runes, c.font = kept, f
			return
		}
	}
	if isInvisible(base) || base == unicode.ReplacementChar {
		c.runes, c.font = nil, None
		return
	}
	c.runes = []rune{unicode.ReplacementChar}
	place(c, chain)
}

// chainFor returns the fallback order for a cluster whose base is r: the
// font of r's script first, then the neutral order.
func chainFor(r rune, buf []Font) []Font {
	buf = buf[:0]
	sf := scriptFont(r)
	if sf != Main {
		buf = append(buf, sf)
	}
	for _, f := range neutralChain {
		if f != sf || sf == Main {
			buf = append(buf, f)
		}
	}
	return buf
}

// MainOnly reports whether SplitRuns(s) is s itself as one run in the
// main font, left to right, because every character is one the main font
// has and none belongs to another script, attaches to the one before or
// is dropped. It is the fast path for mostly Latin text.
func MainOnly(s string) bool {
	for _, r := range s {
		switch {
		case r < 0x80:
			if r < 0x20 && r != '\t' && r != '\n' || r == 0x7F {
				return false
			}
		case r == utf8.RuneError, isDropped(r), isExtender(r), scriptFont(r) != Main,
			r >= 0x1F1E6 && r <= 0x1F1FF, // regional indicators pair up
			coverageOf(r)&covMain == 0:
			return false
		}
	}
	return true
}

// SplitRuns splits running text into runs, each set in a font that has all
// of its glyphs. Letters take the font of their script; punctuation,
// digits and spaces take the main font, except between two right-to-left
// runs of one font, where they join the run (so "مرحبا بكم" stays one
// right-to-left run, as the Unicode bidi algorithm orders it in a
// left-to-right paragraph), and except where the main font lacks them and
// a neighbouring script font has them (the Arabic comma, the Devanagari
// danda). Combining marks, variation selectors and joiners stay with their
// base. Bidi control characters and control characters other than tab and
// newline are dropped; a character no font has becomes U+FFFD.
func SplitRuns(s string) []Run {
	runs, _ := SplitPiece(s, None, None)
	return runs
}

// SplitPiece is SplitRuns for a piece of a longer text (the writer meets a
// paragraph piece by piece, between its markup): prev is the font of the
// last letter before s and next that of the first letter after it, each
// None when there is none or it does not matter. It also returns the
// font of the last letter of s (prev when s has none), the next piece's
// prev.
func SplitPiece(s string, prev, next Font) ([]Run, Font) {
	cs, last := placeLetters(s, prev)
	resolveNeutrals(cs, prev, next)
	return buildRuns(cs), last
}

// SplitPieceRTL is SplitPiece for a paragraph whose base direction is
// right to left (its first strong letter is, rule P2 of the bidi
// algorithm): there the letters of left-to-right scripts, the neutrals
// between two of them and the numbers after them (rules W7 and N1) are
// the stretches TeX--XeT must not reverse, the runs with RTL false; all
// else (right-to-left letters, the neutrals around them, numbers after
// them) has RTL true. prev and next are the fonts of the letters before
// and after s, None when there is none or it does not matter.
func SplitPieceRTL(s string, prev, next Font) ([]Run, Font) {
	cs, last := placeLetters(s, prev)
	resolveNeutralsRTL(cs, prev, next)
	return buildRuns(cs), last
}

// placeLetters splits s into clusters and places its letters in their
// script's font. It returns the font of the last letter (prev when s has
// none).
func placeLetters(s string, prev Font) ([]cluster, Font) {
	cs := clusters(s)
	var buf [numFonts + 1]Font
	last := prev
	for i := range cs {
		c := &cs[i]
		r := c.runes[0]
		c.strong = unicode.IsLetter(r) || scriptFont(r) != Main
		if c.strong {
			place(c, chainFor(r, buf[:]))
			last = c.font
		}
	}
	return cs, last
}

// buildRuns joins placed clusters into runs of one font and direction.
func buildRuns(cs []cluster) []Run {
	var runs []Run
	start, cur, curRTL := 0, None, false
	flush := func(end int) {
		if text := joinClusters(cs[start:end], curRTL && !fonts[cur].rtl); text != "" {
			runs = append(runs, Run{Text: text, Font: fonts[cur].key, RTL: curRTL || fonts[cur].rtl})
		}
		start = end
	}
	for i := range cs {
		c := &cs[i]
		if len(c.runes) == 0 {
			continue
		}
		if c.font == None {
			// Line space joins the run before it rather than split runs.
			c.font, c.rtl = cur, curRTL
			if cur == None {
				c.font = Main
			}
		}
		if c.font != cur || c.rtl != curRTL {
			if cur != None {
				flush(i)
			}
			start, cur, curRTL = i, c.font, c.rtl
		}
	}
	if cur != None {
		flush(len(cs))
	}
	return runs
}

// joinClusters returns the text of cs. For a run of left-to-right font
// inside a right-to-left stretch (visual), it returns the text in the order
// it must be set: TeX--XeT reverses the order of words in the stretch, but
// XeTeX shapes the characters of a word in a left-to-right font from left
// to right. So each word's clusters are reversed here, except numbers,
// which stay left to right as in the bidi algorithm, and brackets are
// mirrored, as a right-to-left renderer would.
func joinClusters(cs []cluster, visual bool) string {
	var b strings.Builder
	if !visual {
		for _, c := range cs {
			for _, r := range c.runes {
				b.WriteRune(r)
			}
		}
		return b.String()
	}
	isSpace := func(c cluster) bool { return len(c.runes) > 0 && unicode.IsSpace(c.runes[0]) && c.runes[0] != 0xA0 }
	for i := 0; i < len(cs); {
		if isSpace(cs[i]) {
			b.WriteString(string(cs[i].runes))
			i++
			continue
		}
		j := i
		for j < len(cs) && !isSpace(cs[j]) {
			j++
		}
		// Reverse cs[i:j], keeping numbers in their order.
		word := cs[i:j]
		for k := len(word) - 1; k >= 0; {
			if isNumberPart(word, k) {
				d := k
				for d > 0 && isNumberPart(word, d-1) {
					d--
				}
				for _, c := range word[d : k+1] {
					b.WriteString(string(c.runes))
				}
				k = d - 1
				continue
			}
			for n, r := range word[k].runes {
				if n == 0 {
					r = mirror(r)
				}
				b.WriteRune(r)
			}
			k--
		}
		i = j
	}
	return b.String()
}

// mirror returns the mirror image of a paired punctuation character, as
// the bidi algorithm shows it in right-to-left text, or r itself.
func mirror(r rune) rune {
	switch r {
	case '(':
		return ')'
	case ')':
		return '('
	case '[':
		return ']'
	case ']':
		return '['
	case '{':
		return '}'
	case '}':
		return '{'
	case '<':
		return '>'
	case '>':
		return '<'
	case '«':
		return '»'
	case '»':
		return '«'
	case '‹':
		return '›'
	case '›':
		return '‹'
	case '≤':
		return '≥'
	case '≥':
		return '≤'
	}
	return r
}

// resolveNeutrals places the clusters that are not letters, each maximal
// sequence of them at once, looking at the letters on either side. It
// follows the bidi algorithm for a left-to-right paragraph: neutrals
// between two right-to-left letters, and numbers after a right-to-left
// letter (with the neutrals before them), belong to the right-to-left
// stretch; everything else is left to right. prev and next are the fonts
// of the letters before and after cs (None for none).
func resolveNeutrals(cs []cluster, prev, next Font) {
	after := next
	for i := 0; i < len(cs); {
		if cs[i].strong {
			prev = cs[i].font
			i++
			continue
		}
		j := i
		for j < len(cs) && !cs[j].strong {
			j++
		}
		next := after
		if j < len(cs) {
			next = cs[j].font
		}
		seq := cs[i:j]
		rtl := 0 // seq[:rtl] belongs to the right-to-left stretch
		if prev != None && fonts[prev].rtl {
			if next != None && fonts[next].rtl {
				rtl = len(seq)
			} else {
				for k := len(seq) - 1; k >= 0; k-- {
					if isNumberPart(seq, k) {
						rtl = k + 1
						break
					}
				}
			}
		}
		for k := range seq[:rtl] {
			// What the right-to-left font has joins its run; the rest
			// (the Hebrew fonts have no punctuation or digits at all) is
			// set in another font but stays in the stretch.
			c := &seq[k]
			switch {
			case isLineSpace(c.runes[0]) || coverageOf(c.runes[0])&fonts[prev].set != 0:
				place(c, []Font{prev})
				c.font = prev
			case next != None && fonts[next].rtl && coverageOf(c.runes[0])&fonts[next].set != 0:
				place(c, []Font{next})
			default:
				place(c, neutralChain[:])
				c.rtl = true
			}
		}
		placeNeutrals(seq[rtl:], prev, next)
		i = j
	}
}

// resolveNeutralsRTL places the clusters that are not letters in a
// paragraph whose base direction is right to left: a sequence of them
// between two left-to-right letters, and the numbers after a
// left-to-right letter with the neutrals before them, join the
// left-to-right stretch; everything else stays in the right-to-left flow
// (cluster.rtl), set in an adjacent right-to-left font where that has the
// character. prev and next are the fonts of the letters before and after
// cs (None for none).
func resolveNeutralsRTL(cs []cluster, prev, next Font) {
	ltr := func(f Font) bool { return f != None && !fonts[f].rtl }
	after := next
	for i := 0; i < len(cs); {
		if cs[i].strong {
			prev = cs[i].font
			i++
			continue
		}
		j := i
		for j < len(cs) && !cs[j].strong {
			j++
		}
		next := after
		if j < len(cs) {
			next = cs[j].font
		}
		seq := cs[i:j]
		l := 0 // seq[:l] belongs to the left-to-right stretch
		if ltr(prev) {
			if ltr(next) {
				l = len(seq)
			} else {
				for k := len(seq) - 1; k >= 0; k-- {
					if isNumberPart(seq, k) {
						l = k + 1
						break
					}
				}
			}
		}
		placeNeutrals(seq[:l], prev, next)
		for k := range seq[l:] {
			c := &seq[l+k]
			switch {
			case prev != None && fonts[prev].rtl && (isLineSpace(c.runes[0]) || coverageOf(c.runes[0])&fonts[prev].set != 0):
				place(c, []Font{prev})
				c.font = prev
			case next != None && fonts[next].rtl && coverageOf(c.runes[0])&fonts[next].set != 0:
				place(c, []Font{next})
			default:
				place(c, neutralChain[:])
			}
			// In a right-to-left font the run is right to left anyway;
			// in another it must say so.
			c.rtl = c.font != None && !fonts[c.font].rtl
		}
		i = j
	}
}

// placeNeutrals places neutrals that run left to right: in the main font
// first, then the fonts of the letters on either side, then the rest.
func placeNeutrals(seq []cluster, prev, next Font) {
	var buf [numFonts + 2]Font
	chain := append(buf[:0], Main)
	for _, f := range []Font{prev, next} {
		if f != None && f != Main {
			chain = append(chain, f)
		}
	}
	for _, f := range neutralChain[1:] {
		if f != prev && f != next {
			chain = append(chain, f)
		}
	}
	for k := range seq {
		place(&seq[k], chain)
	}
}

// isNumberPart reports whether cs[k] belongs to a number in the sense of
// the bidi algorithm: a digit, a separator between two digits ("1.5",
// "1,000", "12:30", "1+2"), or a currency or percent sign next to a digit.
func isNumberPart(cs []cluster, k int) bool {
	digit := func(i int) bool {
		return i >= 0 && i < len(cs) && len(cs[i].runes) > 0 && unicode.IsDigit(cs[i].runes[0])
	}
	if digit(k) {
		return true
	}
	if len(cs[k].runes) == 0 {
		return false
	}
	switch r := cs[k].runes[0]; {
	case strings.ContainsRune(",.:/+-", r):
		return digit(k-1) && digit(k+1)
	case strings.ContainsRune("#$%°¢£¤¥‰€₹₽₿", r) || unicode.Is(unicode.Sc, r):
		return digit(k-1) || digit(k+1)
	}
	return false
}

// Of returns the font groups the text s needs: those of the runs
// SplitRuns(s) makes, and those each of its characters would need on its
// own, so that the preamble also serves pieces of s that the writer splits
// at Markdown markup (a mark after emphasis, say).
func Of(s string) Set {
	var sc Set
	for _, run := range SplitRuns(s) {
		sc |= scriptsOfKey(run.Font)
	}
	var buf [numFonts + 1]Font
	for _, r := range s {
		if isDropped(r) || isLineSpace(r) || r < 0x80 {
			continue
		}
		c := cluster{runes: []rune{r}}
		place(&c, chainFor(r, buf[:]))
		if c.font != None {
			sc |= fonts[c.font].scripts
		}
	}
	return sc
}

func scriptsOfKey(key string) Set {
	for _, f := range fonts {
		if f.key == key {
			return f.scripts
		}
	}
	return 0
}

// FontPreamble returns the preamble lines that load the fallback fonts of
// the groups in s and define \opfont<key> for every key SplitRuns can
// return. Keys whose group is not in s are defined too, as macros that set
// their argument in the current font: a document whose text was split
// differently than Of foresaw then loses a glyph (logged by XeTeX)
// instead of failing on an undefined command.
//
// It needs fontspec loaded. Right-to-left groups switch on TeX--XeT
// (\TeXXeTstate=1), which \beginR and \endR need.
func FontPreamble(s Set) string {
	var b strings.Builder
	b.WriteString("% Fallback fonts for the scripts of this profile (markdown.FontPreamble).\n")
	if s&(Arabic|Hebrew) != 0 {
		b.WriteString("\\TeXXeTstate=1\n")
	}
	for _, f := range fonts[1:] {
		if s&f.scripts == 0 {
			b.WriteString("\\newcommand\\opfont" + f.key + "[1]{#1}\n")
			continue
		}
		b.WriteString("\\newfontfamily\\opfam" + f.key + "{" + f.family + "}")
		if f.options != "" {
			b.WriteString("[" + f.options + "]")
		}
		fam := "\\opfam" + f.key
		if f.sans != "" {
			// In sans serif text (headings, the footer) the sans face.
			b.WriteString("\n\\newfontfamily\\opfam" + f.key + "sans{" + f.sans + "}")
			if f.options != "" {
				b.WriteString("[" + f.options + "]")
			}
			fam = "\\expandafter\\ifx\\csname f@family\\endcsname\\sfdefault\\opfam" + f.key + "sans\\else\\opfam" + f.key + "\\fi"
		}
		b.WriteString("\n\\newcommand\\opfont" + f.key + "[1]{{" + fam)
		if f.breakLocale != "" {
			// \XeTeXlinebreaklocale is global, so it is set back at the end
			// of the run; the characters of #1 have been read by then.
			b.WriteString("\\XeTeXlinebreaklocale \"" + f.breakLocale + "\"\\XeTeXlinebreakskip=0pt plus 1pt\\relax #1\\XeTeXlinebreaklocale \"\"\\relax}}\n")
		} else {
			b.WriteString("#1}}\n")
		}
	}
	return b.String()
}

// WriteRuns writes runs as LaTeX to w, escaping each run's text with
// escape: a run in the main font as its escaped text, one in a fallback
// font as \opfont<key>{…}, and each maximal sequence of RTL runs inside one
// \beginR … \endR. w is a strings.Builder, whose writes cannot fail, so
// WriteRuns has no error to return.
func WriteRuns(w *strings.Builder, runs []Run, escape func(string) string) {
	for i, r := range runs {
		if r.RTL && (i == 0 || !runs[i-1].RTL) {
			w.WriteString("\\beginR ")
		}
		if r.Font == "" {
			w.WriteString(escape(r.Text))
		} else {
			w.WriteString("\\opfont" + r.Font + "{" + escape(r.Text) + "}")
		}
		if r.RTL && (i == len(runs)-1 || !runs[i+1].RTL) {
			w.WriteString("\\endR{}")
		}
	}
}

// FontMacros returns the control sequences WriteRuns and a writer emit
// for runs: \beginR, \endR around right-to-left stretches, \beginL, \endL
// around left-to-right ones in a right-to-left paragraph, and
// \opfont<key> for every fallback font.
func FontMacros() []string {
	out := []string{`\beginR`, `\endR`, `\beginL`, `\endL`}
	for _, f := range fonts[1:] {
		out = append(out, `\opfont`+f.key)
	}
	return out
}
