package markdown

import (
	"strings"
	"unicode/utf8"
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
	firstBreak int
	everyBreak int
	para       int // bytes of text since the last block started
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
		w.raw(`\opbrk{}`)
		return
	}
	w.plainSpace()
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
// is escaped, runs of other scripts get their font switch.
func (w *texWriter) text(s string, m textMode) {
	if m != modePlain && !isASCII(s) {
		for _, r := range SplitRuns(s) {
			if r.Font == "" || !validFontKey(r.Font) {
				w.esc(r.Text, m)
				continue
			}
			w.raw(`\opfont` + r.Font + `{`)
			if r.RTL {
				w.raw(`\beginR `)
			}
			w.esc(r.Text, m)
			if r.RTL {
				w.raw(`\endR`)
			}
			w.raw(`}`)
		}
		return
	}
	w.esc(s, m)
}

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
			if m == modeCode && prevSpace {
				w.raw(`\ `)
				w.word = 0
				continue
			}
			prevSpace = true
			if m == modePlain {
				w.plainSpace()
			} else {
				w.space()
			}
			continue
		}
		prevSpace = false
		if c < 0x80 {
			if e := asciiEsc[c]; e != "" {
				w.b = append(w.b, e...)
				w.col += len(e)
			} else if (c == '-' || c == ',' || c == '\'') && i+1 < len(s) && s[i+1] == c {
				// "--", ",," and "''" stay two characters: the font's TeX
				// ligatures would print a dash or a quotation mark.
				w.b = append(w.b, c, '{', '}')
				w.col += 3
			} else {
				w.b = append(w.b, c)
				w.col++
			}
			i++
		} else {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 || dropRune(r) {
				i += n
				continue
			}
			w.b = append(w.b, s[i:i+n]...)
			w.col += n
			i += n
		}
		w.word++
		w.para++
		if m != modePlain && w.firstBreak > 0 && w.word >= w.firstBreak && (w.word-w.firstBreak)%w.everyBreak == 0 && i < len(s) && s[i] != ' ' {
			if w.word >= forceBreak && (w.word-w.firstBreak)%(w.everyBreak*128) == 0 {
				// XeTeX's time to set a paragraph grows faster than the
				// paragraph when it has no spaces (a 500 KB word took 12 s
				// as one paragraph, 1 s cut into paragraphs of a few
				// lines): \opbrk ends the paragraph and goes on without
				// indentation or space.
				w.raw(`\opbrk{}`)
			} else {
				w.raw(`\opbr{}`)
			}
		}
		if w.col >= softLine+200 {
			w.raw("%\n")
		}
	}
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
			w.space()
			continue
		}
		if w.firstBreak > 0 && w.word+1 >= w.firstBreak || w.col >= softLine+200 {
			w.esc(string(v[i:]), modeText)
			return
		}
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
