package markdown

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/script"
	"golang.org/x/text/unicode/norm"
)

// TeX reads its input line by line into a buffer of about 200,000 bytes;
// a longer line stops the run. The writer keeps every line it makes short:
// it turns a space into a newline, or ends the line with a comment `%`,
// once a line is longer than softLine bytes. Code blocks come from
// HighlightCode, whose input lines are cut to maxCodeLine runes first.
const (
	softLine    = 700
	maxCodeLine = 1000
	forceBreak  = 600
	maxPara     = 16000
)

// asciiEsc maps the ASCII characters that TeX treats specially (or that a
// font or ligature would change) to text that prints them. Every other
// printable ASCII character is written as it is.
var asciiEsc = [128]string{
	'\\': `\textbackslash{}`,
	'{':  `\{`,
	'}':  `\}`,
	'$':  `\$`,
	'&':  `\&`,
	'#':  `\#`,
	'%':  `\%`,
	'_':  `\_`,
	'^':  `\textasciicircum{}`,
	'~':  `\textasciitilde{}`,
	'[':  `{[}`,
	']':  `{]}`,
	'"':  `\textquotedbl{}`,
	'<':  `\textless{}`,
	'>':  `\textgreater{}`,
	'|':  `\textbar{}`,
	'`':  `\textasciigrave{}`,
	'\t': ` `,
	'\n': ` `,
}

// texWriter accumulates LaTeX and records, for every output line, the
// Markdown line it came from.
type texWriter struct {
	b     []byte
	col   int   // bytes since the last newline
	lines []int // Markdown line of each finished output line
	cur   int   // Markdown line of what is being written now

	// Word breaking: a run of more than firstBreak characters without a
	// space gets a break opportunity (\opbr) every everyBreak characters,
	// so that no word, URL or code span runs off the page.
	word       int
	alnum      bool // the last character of the run was a letter or digit
	firstBreak int
	everyBreak int
	breakDue   bool // a break fell before a closing mark: take it at the next character
	cutDue     bool // that break ends the paragraph (forceBreak)
	para       int  // bytes of text since the last block started

	// urlBreaks adds a break opportunity after each `/`, `.` and `-` of
	// code text (a URL): it breaks there before it breaks inside a word.
	urlBreaks bool

	// Embedded stretches: right-to-left text in a left-to-right paragraph
	// (\beginR … \endR), left-to-right text in a right-to-left one
	// (\beginL … \endL). A stretch (see WriteRuns) must not be split, or
	// its words print in the wrong order; in a paragraph it may span
	// several pieces of text, across bold, italics, links and code, which
	// TeX--XeT reverses as a whole. Where bidi is false each piece of text
	// is a paragraph of its own.
	bidi      bool                               // pieces of text share stretches (a paragraph's inlines)
	rtlPara   bool                               // the paragraph runs right to left (the bidi package's \setRTL)
	embOpen   bool                               // a stretch's \beginR or \beginL written, its end not yet
	frozen    bool                               // inside ulem: embOpen does not change, embedded runs are stretches of their own
	embPrev   script.Font                        // font of the last letter written if it belongs to a stretch, else script.None
	lookahead func() (f script.Font, digit bool) // the first letter after the current piece (see writer.nextLetter)

	// emoji returns the image file of an emoji name (see emoji.go), ok
	// false when there is none; nil: every emoji stays text.
	emoji func(name string) (file string, ok bool)
}

// raw writes LaTeX made by the writer (or by HighlightCode) as it is.
func (w *texWriter) raw(s string) {
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			w.b = append(w.b, s...)
			w.col += len(s)
			return
		}
		w.b = append(w.b, s[:i+1]...)
		w.lines = append(w.lines, w.cur)
		w.col = 0
		s = s[i+1:]
	}
}

// nl ends the current line unless it is empty. The writer never makes a
// blank line: paragraphs end with \par, so no argument can ever receive
// one.
func (w *texWriter) nl() {
	w.word = 0
	w.para = 0
	if w.col == 0 {
		return
	}
	if w.b[len(w.b)-1] == '{' {
		// A newline after an opening brace would be a space in the
		// argument.
		w.b = append(w.b, '%')
	}
	w.b = append(w.b, '\n')
	w.lines = append(w.lines, w.cur)
	w.col = 0
}

// soft ends the line with a comment when it has grown long; it is called
// between tokens, where `%` and a newline change nothing.
func (w *texWriter) soft() {
	if w.col >= softLine {
		w.raw("%\n")
	}
}

// space writes an inter-word space, as a newline when the line is long.
// In a paragraph longer than maxPara bytes the space ends the paragraph
// instead (\opbrk goes on without indentation or space between): XeTeX's
// time to set a paragraph grows with its square (54 KB took 0.4 s, 216 KB
// 5.6 s, 900 KB over two minutes), so a giant paragraph is set in parts.
func (w *texWriter) space() {
	if w.para >= maxPara {
		w.para = 0
		w.word = 0
		w.parBreak()
		return
	}
	w.plainSpace()
}

// parBreak ends the paragraph and goes on without indentation or space
// (\opbrk). A stretch cannot span two paragraphs: it is closed before and
// opened again after.
func (w *texWriter) parBreak() {
	if w.embOpen && !w.frozen {
		begin, end := w.embMacros()
		w.raw(end + `\opbrk{}` + begin)
		return
	}
	w.raw(`\opbrk{}`)
}

// plainSpace is space without the paragraph cut (bookmarks, PDF strings).
func (w *texWriter) plainSpace() {
	w.word = 0
	if w.col >= softLine {
		w.b = append(w.b, '\n')
		w.lines = append(w.lines, w.cur)
		w.col = 0
		return
	}
	w.b = append(w.b, ' ')
	w.col++
}

// textMode says how text is written.
type textMode int

const (
	modeText  textMode = iota // running text: escapes, word breaks, font runs
	modeCode                  // inside \optt: as text, but every space kept
	modePlain                 // bookmarks and PDF strings: escapes only
)

// text writes user text: every character that could mean something to TeX
// is escaped, runs of other scripts get their font switch, stretches that
// run against the paragraph's direction are put between \beginR and \endR
// (or \beginL and \endL).
func (w *texWriter) text(s string, m textMode) {
	if m == modePlain || !w.rtlPara && !w.inEmb() && (isASCII(s) || script.MainOnly(s)) {
		// Text the main font draws alone, in a left-to-right paragraph
		// after a left-to-right letter (or none), is one left-to-right
		// run: nothing to split.
		w.esc(s, m)
		return
	}
	prev := w.embPrev
	if !w.emb(prev) {
		// Only a letter of a stretch before s changes how s is split.
		prev = script.None
	}
	runs, last := w.split(s, prev, script.None)
	next := script.None
	if w.emb(last) && w.bidi && w.lookahead != nil {
		// What follows s decides whether the stretch goes on: the
		// neutrals at the end of s belong to it only if a letter of the
		// stretch's direction (or a number) comes next.
		f, digit := w.lookahead()
		switch {
		case digit:
			next = last
		case w.emb(f):
			next = f
		}
		if next != script.None {
			runs, last = w.split(s, prev, next)
		}
	}
	w.runs(runs, m)
	w.embPrev = script.None
	if w.emb(last) && w.bidi {
		w.embPrev = last
	}
	if next == script.None {
		w.endEmb()
	}
}

// split splits s into runs for the paragraph's direction.
func (w *texWriter) split(s string, prev, next script.Font) ([]script.Run, script.Font) {
	if w.rtlPara {
		return script.SplitPieceRTL(s, prev, next)
	}
	return script.SplitPiece(s, prev, next)
}

// emb reports whether a letter in font f runs against the paragraph's
// direction: it belongs to an embedded stretch.
func (w *texWriter) emb(f script.Font) bool { return f != script.None && f.RTL() != w.rtlPara }

// embMacros returns what begins and ends a stretch in this paragraph.
// Not "\beginR ": a space that starts the run would be skipped as the end
// of the control word.
func (w *texWriter) embMacros() (begin, end string) {
	if w.rtlPara {
		return `\beginL{}`, `\endL{}`
	}
	return `\beginR{}`, `\endR{}`
}

// runs writes runs: each in its font's \opfont<key>{…} (the main font's
// plain), each maximal sequence of runs against the paragraph's direction
// after \beginR (or \beginL). The stretch is left open after the last
// run; endEmb closes it.
func (w *texWriter) runs(runs []script.Run, m textMode) {
	begin, end := w.embMacros()
	if w.frozen {
		for _, r := range runs {
			emb := r.RTL != w.rtlPara
			if !emb && (r.Font == "" || !validFontKey(r.Font)) {
				w.esc(r.Text, m)
				continue
			}
			if r.Font != "" && validFontKey(r.Font) {
				w.raw(`\opfont` + r.Font)
			}
			w.raw(`{`)
			if emb {
				w.raw(begin)
			}
			w.escRun(r, m)
			if emb {
				w.raw(end)
			}
			w.raw(`}`)
		}
		return
	}
	for _, r := range runs {
		emb := r.RTL != w.rtlPara
		if emb && !w.embOpen {
			w.raw(begin)
			w.embOpen = true
		} else if !emb && w.embOpen {
			w.endEmb()
		}
		if r.Font == "" || !validFontKey(r.Font) {
			w.esc(r.Text, m)
			continue
		}
		w.raw(`\opfont` + r.Font + `{`)
		w.escRun(r, m)
		w.raw(`}`)
	}
}

// maxActualWord bounds the words that carry their text (see escRun): a
// longer word could not break over lines in its box.
const maxActualWord = 48

// escRun writes a run's text. In the scripts whose shaping reorders and
// merges glyphs (Devanagari and its relatives: a vowel sign drawn before
// its consonant, conjuncts drawn as one glyph) the glyphs do not map back
// to the text, so copying or searching the PDF would find broken words:
// each word is set as \opactual{hex}{word}, a marked-content span whose
// /ActualText is the word's own text (UTF-16BE in hex, so no user text
// reaches the special).
func (w *texWriter) escRun(r script.Run, m textMode) {
	// In a right-to-left stretch TeX--XeT reverses what it holds, the
	// specials of an image's text layer too, so there emoji stay text.
	if w.emoji != nil && m == modeText && !w.frozen && !r.RTL && w.embOpen == w.rtlPara && hasEmojiStart(r.Text) {
		w.emojiRun(r, m)
		return
	}
	w.escText(r, m)
}

// emojiRun writes a run's text with each emoji sequence that has an image
// as \opemoji{hex}{file} (see emoji.go): the hex is the sequence's own
// text and the file a name the images stage made, so no user text reaches
// TeX as a command.
func (w *texWriter) emojiRun(r script.Run, m textMode) {
	s := r.Text
	start := 0
	for i := 0; i < len(s); {
		n := emojiAt(s, i)
		if n == 0 {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			continue
		}
		seq := s[i : i+n]
		file, ok := w.emoji(EmojiName(seq))
		if !ok {
			i += n
			continue
		}
		if start < i {
			w.escText(script.Run{Text: s[start:i], Font: r.Font, RTL: r.RTL}, m)
		}
		w.raw(`\opemoji{` + emojiHex(seq) + `}{` + file + `}`)
		w.word = 0
		i += n
		start = i
	}
	if start < len(s) {
		w.escText(script.Run{Text: s[start:], Font: r.Font, RTL: r.RTL}, m)
	}
}

// escText writes a run's text as text (see escRun).
func (w *texWriter) escText(r script.Run, m textMode) {
	if r.Font == "arabic" {
		// A letter with its mark composed (ه and ٔ as ۀ, ا and ٓ as آ):
		// the font draws the same, and the text layer then holds one
		// letter where a separate mark would split the line for a
		// reader extracting it (poppler's pdftotext did).
		r.Text = norm.NFC.String(r.Text)
	}
	if !script.ActualText(r.Font) || m == modePlain {
		w.esc(r.Text, m)
		return
	}
	text := r.Text
	for text != "" {
		i := strings.IndexAny(text, " \t\n")
		if i == 0 {
			w.esc(text[:1], m)
			text = text[1:]
			continue
		}
		word := text
		if i > 0 {
			word = text[:i]
		}
		text = text[len(word):]
		if utf8.RuneCountInString(word) > maxActualWord {
			w.esc(word, m)
			continue
		}
		actual := norm.NFC.String(word)
		if text != "" {
			// The space after the word belongs to its text: poppler
			// spreads the text over the glyphs' box, and a vowel sign
			// at the end narrows the gap to the next word below its
			// threshold for a space.
			actual += " "
		}
		var hex strings.Builder
		hex.WriteString("FEFF")
		for _, u := range utf16.Encode([]rune(actual)) {
			fmt.Fprintf(&hex, "%04X", u)
		}
		w.raw(`\opactual{` + hex.String() + `}{`)
		w.esc(word, m)
		w.raw(`}`)
	}
}

// inEmb reports whether text written now continues a stretch or follows
// a letter of one.
func (w *texWriter) inEmb() bool { return w.embOpen || w.emb(w.embPrev) }

// endEmb closes an open stretch (not inside ulem, where it stays as it
// is).
func (w *texWriter) endEmb() {
	if w.embOpen && !w.frozen {
		_, end := w.embMacros()
		w.raw(end)
		w.embOpen = false
	}
}

// bidiBreak ends the bidirectional paragraph: what comes next (after a
// line break, a formula, an image) starts afresh.
func (w *texWriter) bidiBreak() {
	w.endEmb()
	w.embPrev = script.None
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// validFontKey guards the one place where a name from another file becomes
// part of a control sequence.
func validFontKey(k string) bool {
	if k == "" || len(k) > 20 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 'a' || k[i] > 'z' {
			return false
		}
	}
	return true
}

// esc escapes s character by character.
func (w *texWriter) esc(s string, m textMode) {
	prevSpace := false
	for i := 0; i < len(s); {
		c := s[i]
		if c == ' ' || c == '\t' || c == '\n' {
			i++
			prevSpace = w.escSpace(m, prevSpace)
			continue
		}
		prevSpace = false
		w.wordBreak(m, c)
		if c < 0x80 {
			w.escASCII(s, i, m)
			i++
		} else {
			r, n := utf8.DecodeRuneInString(s[i:])
			i += n
			if r == utf8.RuneError && n == 1 || dropRune(r) {
				continue
			}
			w.b = append(w.b, s[i-n:i]...)
			w.col += n
		}
		w.word++
		w.para++
		if w.col >= softLine+200 {
			w.raw("%\n")
		}
	}
}

// escSpace writes a space of s (see esc) after a space when prevSpace
// and reports whether the next one follows a space.
func (w *texWriter) escSpace(m textMode, prevSpace bool) bool {
	switch {
	case m == modeCode && prevSpace:
		w.raw(`\ `)
		w.word = 0
		return true
	case m == modeText && w.afterWideStop():
		// A full-width stop or comma carries its own space.
		return false
	case m == modePlain:
		w.plainSpace()
	default:
		w.space()
	}
	return true
}

// escASCII writes the ASCII character s[i] (see esc).
func (w *texWriter) escASCII(s string, i int, m textMode) {
	c := s[i]
	twin := i+1 < len(s) && s[i+1] == c
	switch e := asciiEsc[c]; {
	case e != "":
		w.b = append(w.b, e...)
		w.col += len(e)
	case c == '\'' && m == modeCode:
		// Literal text (code, raw HTML) keeps its straight
		// apostrophe, as it keeps its straight double quote.
		w.raw(`\textquotesingle{}`)
	case (c == '-' || c == ',' || c == '\'') && twin:
		// "--", ",," and "''" stay two characters: the font's TeX
		// ligatures would print a dash or a quotation mark.
		w.b = append(w.b, c, '{', '}')
		w.col += 3
	default:
		w.b = append(w.b, c)
		w.col++
		if w.urlBreaks && m == modeCode && i+1 < len(s) && !twin {
			w.urlBreak(c)
		}
	}
}

// urlBreak adds a break opportunity after the `/`, `.` or `-` of a URL
// (unless another follows, see escASCII).
func (w *texWriter) urlBreak(c byte) {
	if c == '/' || c == '.' || c == '-' {
		w.raw(`\opbr{}`)
		w.word = -1 // counted by esc
	}
}

// wordBreak gives a long run of characters without a space a break
// opportunity before its next character: after firstBreak characters and
// then every everyBreak. It is decided before a character is written, not
// after, so that a run split over many text pieces (`[a[a[a…`, where every
// bracket is a node of its own) gets its breaks too: a 600-byte run of
// them had none, ran off the page, and longer ones crashed XeTeX.
//
// A break that falls before a closing mark stays due and is taken before
// the next character that allows it. It used to be dropped, so a run whose
// period divides everyBreak (`[a](<b` repeated: every due break fell
// before the `]`) got no break and no paragraph cut at all, and XeTeX set
// it as one word in one paragraph: 24 KB took a minute (issue 29).
func (w *texWriter) wordBreak(m textMode, next byte) {
	after := w.alnum
	w.alnum = next >= 0x80 || isASCIIAlnum(next)
	if m == modePlain || w.firstBreak <= 0 || w.word < w.firstBreak {
		w.breakDue, w.cutDue = false, false
		return
	}
	if (w.word-w.firstBreak)%w.everyBreak == 0 {
		w.breakDue = true
		// XeTeX's time to set a paragraph grows faster than the
		// paragraph when it has no spaces (a 500 KB word took 12 s
		// as one paragraph, 1 s cut into paragraphs of a few
		// lines): every 128th break of a long run ends the paragraph
		// (\opbrk goes on without indentation or space).
		if w.word >= forceBreak && (w.word-w.firstBreak)%(w.everyBreak*128) == 0 {
			w.cutDue = true
		}
	}
	if !w.breakDue {
		return
	}
	if after && strings.IndexByte(",.;:!?)]}'\"", next) >= 0 {
		// No line starts with the comma or bracket that closes a word
		// (after a link, say); runs of punctuation still break.
		return
	}
	w.breakDue = false
	if w.cutDue {
		w.cutDue = false
		w.parBreak()
		return
	}
	w.raw(`\opbr{}`)
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// afterWideStop reports whether the last character written (inside its
// font group, if one just closed) is full-width punctuation such as 。 or
// ！, whose glyph already ends in white space.
func (w *texWriter) afterWideStop() bool {
	b := w.b
	for len(b) > 0 && b[len(b)-1] == '}' {
		b = b[:len(b)-1]
	}
	r, _ := utf8.DecodeLastRune(b)
	switch r {
	case '、', '。', '，', '．', '！', '？', '：', '；', '」', '』', '）':
		return true
	}
	return false
}

// plainASCII reports whether a Text node's raw text is ASCII without
// backslash escapes or entity references: it can be written as it is.
func plainASCII(v []byte) bool {
	for _, c := range v {
		if c >= 0x80 || c == '\\' || c == '&' {
			return false
		}
	}
	return true
}

// escBytes is esc for plainASCII text in running text, without a string
// copy; long words and long lines take esc's general path.
func (w *texWriter) escBytes(v []byte) {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' || c == '\t' || c == '\n' {
			// ASCII text follows a full-width stop only at its start.
			if i > 0 || !w.afterWideStop() {
				w.space()
			}
			continue
		}
		if w.firstBreak > 0 && w.word+1 >= w.firstBreak || w.col >= softLine+200 {
			w.esc(string(v[i:]), modeText)
			return
		}
		w.alnum = isASCIIAlnum(c)
		switch e := asciiEsc[c]; {
		case e != "":
			w.b = append(w.b, e...)
			w.col += len(e)
		case (c == '-' || c == ',' || c == '\'') && i+1 < len(v) && v[i+1] == c:
			w.b = append(w.b, c, '{', '}')
			w.col += 3
		default:
			w.b = append(w.b, c)
			w.col++
		}
		w.word++
		w.para++
	}
}
