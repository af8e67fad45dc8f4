package markdown

import (
	"bytes"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	emojiast "github.com/yuin/goldmark-emoji/ast"
	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"

	"github.com/outprint/outprint/internal/limits"
)

// Meta is the binding of a document: what the title block, the document
// information and the layout switches show.
type Meta struct {
	Title, Subtitle, Author, Version, Date, Language string
	TOC, NumberSections                              bool
}

// Output is the body of a document: everything between \begin{document}
// and \end{document}.
type Output struct {
	Body string
	// Lines[i] is the Markdown line (in the original file) that line i+1
	// of Body came from, 0 when none applies.
	Lines []int
	// Warnings lists what was printed differently than written (links
	// without a usable target).
	Warnings []limits.Problem
	// TOC is set when the body has a table of contents. It is typeset in
	// the same run as the rest (see tocBlock), so it needs no second run.
	TOC bool
}

// Nesting bounds. LaTeX allows as many list levels as enumitem's
// \setlistdepth (9, set in the preamble) across lists, quotes and toggles
// together; deeper levels are flattened into the deepest one. Notice frames
// nest a few levels at most, deeper ones print as labelled paragraphs.
const (
	maxListDepth  = 8
	maxFrameDepth = 3
	maxURLBytes   = 4000
	maxBookmark   = 200 // runes of a heading's bookmark text
	maxBodyLine   = 100_000
)

var sectionCommands = [...]string{"section", "subsection", "subsubsection", "paragraph", "subparagraph"}

// LaTeX writes the body of the document. images maps ImageRef.URL to the
// image files the TeX folder holds; an image missing from it prints its
// alternative text (the images stage has reported it already).
func (d *Document) LaTeX(meta Meta, images map[string]Image) (*Output, error) {
	return d.latex(nil, meta, images)
}

// latex is LaTeX that gives up (panics with errStopped, see LaTeXContext)
// at the next block once stop returns true; a nil stop never stops.
func (d *Document) latex(stop func() bool, meta Meta, images map[string]Image) (*Output, error) {
	r := &writer{d: d, images: images, fnNumber: map[int]int{}, stop: stop}
	r.lookahead = r.nextLetter
	r.emoji = func(name string) (string, bool) {
		img, ok := images[EmojiKey(name)]
		return img.File, ok && safeFile(img.File)
	}
	r.rtlPrev = fontNone
	r.texWriter.b = make([]byte, 0, len(d.src)*2+4096)
	r.firstBreak, r.everyBreak = 20, 6

	// The first level-1 heading is the title block's when it says the same.
	if first := d.root.FirstChild(); d.titleH1 && first != nil && meta.Title != "" &&
		cleanLine(d.plain(first)) == cleanLine(meta.Title) {
		r.skip = first
	}
	r.sectionBase = 7
	headings := 0
	r.anchors = make(map[string]string, len(d.heads))
	r.dests = make(map[*ast.Heading]string, len(d.heads))
	for _, h := range d.heads {
		if ast.Node(h.node) == r.skip {
			continue
		}
		r.checkStop()
		headings++
		r.sectionBase = min(r.sectionBase, h.node.Level)
		r.anchor(h)
	}

	r.docinfo(meta)
	if meta.NumberSections {
		r.raw("\\setcounter{secnumdepth}{5}%\n")
	} else {
		r.raw("\\setcounter{secnumdepth}{0}%\n")
	}
	if headings == 0 {
		// No heading, no bookmark: the viewer opens no empty bookmarks
		// panel (hyperref asks for it whenever bookmarks are on).
		r.raw("\\special{pdf:docview <</PageMode /UseNone>>}%\n")
	}
	r.titleBlock(meta)
	toc := meta.TOC && headings > 0
	if toc {
		r.tocBlock(meta.NumberSections)
	}
	r.blocks(d.root)
	r.nl()
	if cleanLine(meta.Title) == "" && !toc && d.root.ChildCount() == 0 {
		// TeX makes no PDF without a page: an empty document gets one.
		r.raw("\\null\n")
	}
	out := &Output{Body: string(r.b), Lines: r.lines, Warnings: limits.CapProblems(r.warnings, 0), TOC: toc}
	// A guard, not a limit users meet: TeX's line buffer holds 200,000
	// bytes, and the writer's lines stay far below (code lines are cut to
	// maxCodeLine runes before highlighting).
	if n := longestLine(out.Body); n > maxBodyLine {
		return nil, fmt.Errorf("latex: line of %d bytes", n)
	}
	return out, nil
}

func longestLine(s string) int {
	longest := 0
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			i = len(s)
		}
		longest = max(longest, i)
		s = s[min(i+1, len(s)):]
	}
	return longest
}

// writer turns the syntax tree into LaTeX.
type writer struct {
	texWriter
	stop     func() bool // true: give up at the next block (LaTeXContext)
	d        *Document
	images   map[string]Image
	warnings []limits.Problem

	skip        ast.Node          // the heading shown as the title
	sectionBase int               // heading level written as \section
	anchors     map[string]string // heading slug -> PDF destination name
	dests       map[*ast.Heading]string
	tocKeys     map[*ast.Heading]string // headings listed in the table of contents -> their page key
	fnNumber    map[int]int             // footnote index -> number it was given
	fnCount     int                     // footnote numbers given so far
	pending     []pendingNote           // footnotes to typeset after this block

	listDepth  int  // open list-like environments (lists, quotes, toggles)
	frameDepth int  // open notice frames
	footnote   bool // inside \footnote: no Verbatim, no longtable, no \section
	cell       bool // inside a table cell
	header     bool // inside a table header row (typeset twice)
	heading    bool // inside a heading: a moving argument
	ulem       int  // inside \opul, \opst or \ophl
	link       bool // inside link text
	caption    bool // inside an image caption (a minipage)
	wrapNext   bool // the next paragraph runs beside a half-width image
	args       int  // open macro arguments around inline text (\textbf{…}, \href{…}{…}): no \par there
	quiet      bool // writing text a second time: no warnings

	// htmlClose holds the closing tags of allowed inline HTML (html.go)
	// whose opening tag has been written: what each one writes.
	htmlClose map[ast.Node]string

	// The bidirectional paragraph being written (bidi.go): its root, the
	// inline node being written, and laStop when a line break ends the
	// current piece of text.
	laRoot, laNode ast.Node
	laStop         bool
	tocCopy        bool // writing a heading's copy for the table of contents

	bounds writerBounds // what keeps the writer's work linear (bounds.go)
}

// boxed reports whether the current place cannot hold a page-breaking
// construct (longtable, Verbatim, sectioning).
func (r *writer) boxed() bool { return r.footnote || r.cell || r.frameDepth > 0 }

func (r *writer) at(n ast.Node) {
	if p := r.d.blockPos(n); p >= 0 {
		r.cur = r.d.line(p)
	}
}

func (r *writer) warn(n ast.Node, format string, args ...any) {
	if r.quiet {
		return
	}
	line := 0
	if p := n.Pos(); p >= 0 {
		line = r.d.line(p)
	}
	r.warnings = append(r.warnings, limits.Problem{
		Source:  limits.SourceDocument,
		Code:    limits.CodeInvalid,
		Line:    line,
		Message: fmt.Sprintf(format, args...),
	})
}

// ---------------------------------------------------------------- front

// docinfo writes the PDF document information and catalog language as
// xdvipdfmx specials. The strings are UTF-16BE hex, so nothing in them
// needs escaping; the language is checked against a BCP 47 shape.
func (r *writer) docinfo(m Meta) {
	var b strings.Builder
	b.WriteString(`\special{pdf:docinfo<<`)
	for _, kv := range [][2]string{{"Title", m.Title}, {"Author", m.Author}, {"Subject", m.Subtitle}} {
		if v := cleanLine(kv[1]); v != "" {
			b.WriteString("/" + kv[0] + " " + pdfHex(v) + " ")
		}
	}
	b.WriteString("/Creator (outprint)>>}%\n")
	r.raw(b.String())
	lang := m.Language
	if lang == "" {
		lang = "en"
	}
	if validLang(lang) {
		r.raw(`\special{pdf:put @catalog <</Lang (` + lang + `)>>}%` + "\n")
	}
	// Hyphenation patterns of the document's language (a name from a
	// fixed table, never user text).
	r.raw(`\oplanguage{` + hyphenationName(lang) + `}%` + "\n")
}

var langRE = regexp.MustCompile(`^[A-Za-z]{1,8}(-[A-Za-z0-9]{1,8})*$`)

func validLang(s string) bool { return len(s) <= 35 && langRE.MatchString(s) }

// pdfHex returns s as a PDF hex string in UTF-16BE with a byte order mark,
// cut to 2000 characters.
func pdfHex(s string) string {
	u := utf16.Encode([]rune(s))
	if len(u) > 2000 {
		u = u[:2000]
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(6 + 4*len(u) + len(u)/50)
	b.WriteString("<FEFF")
	for i, c := range u {
		b.Write([]byte{hex[c>>12], hex[c>>8&15], hex[c>>4&15], hex[c&15]})
		if i%100 == 99 {
			b.WriteString("%\n") // keep lines short; a comment ends inside the special
		}
	}
	b.WriteString(">")
	return b.String()
}

func (r *writer) titleBlock(m Meta) {
	title := cleanLine(m.Title)
	if title == "" && m.Subtitle == "" && m.Author == "" {
		return
	}
	r.raw(`\begin{optitleblock}` + "\n")
	r.macro("optitle", title)
	r.macro("opsubtitle", cleanLine(m.Subtitle))
	r.macro("opbyline", cleanLine(m.Author))
	var info []string
	if v := cleanLine(m.Version); v != "" {
		info = append(info, "Version "+v)
	}
	if v := cleanLine(m.Date); v != "" {
		info = append(info, v)
	}
	r.macro("opbyline", strings.Join(info, " · "))
	r.raw(`\end{optitleblock}` + "\n")
}

// macro writes \name{text} for a non-empty text.
func (r *writer) macro(name, text string) {
	if text == "" {
		return
	}
	r.raw(`\` + name + `{`)
	r.text(text, modeText)
	r.raw("}\n")
}

// ---------------------------------------------------------------- blocks

func (r *writer) blocks(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.block(c)
	}
}

func (r *writer) block(n ast.Node) {
	if n == r.skip {
		return
	}
	r.checkStop()
	r.at(n)
	r.nl()
	switch n := n.(type) {
	case *ast.Paragraph:
		r.paragraph(n)
	case *ast.TextBlock:
		r.paragraph(n)
	case *ast.Heading:
		r.headingBlock(n)
	case *ast.ThematicBreak:
		r.thematicBreak(n)
	case *ast.FencedCodeBlock:
		lang := ""
		if n.Info != nil {
			info := n.Info.Segment.Value(r.d.src)
			if i := bytes.IndexAny(info, " \t{"); i >= 0 {
				info = info[:i]
			}
			lang = resolveEscapes(info)
		}
		r.code(lang, r.rawLines(n))
	case *ast.CodeBlock:
		r.code("", r.rawLines(n))
	case *ast.HTMLBlock:
		s := r.rawLines(n)
		if n.HasClosure() {
			s += string(n.ClosureLine.Value(r.d.src))
		}
		if isComment(s) {
			return // an HTML comment prints nowhere
		}
		r.codeLines(s, false)
	case *ast.Blockquote:
		r.nested("quote", "", n)
	case *ast.List:
		r.list(n)
	case *extast.Table:
		r.table(n)
	case *extast.FootnoteList:
		// Footnotes are typeset where they are referenced.
	case *Notice:
		r.notice(n)
	case *Toggle:
		r.toggle(n)
	case *MathBlock:
		r.mathBlock(n)
	default:
		r.blocks(n)
	}
	r.flushNotes()
}

// lines returns the raw lines of a code-like block.
func (r *writer) rawLines(n ast.Node) string {
	var b strings.Builder
	l := n.Lines()
	for i := 0; i < l.Len(); i++ {
		s := l.At(i)
		b.Write(s.Value(r.d.src))
	}
	return b.String()
}

func (r *writer) paragraph(n ast.Node) {
	if r.onlyImages(n) {
		if img := r.wrapImage(n); img != nil {
			r.wrapFigure(img)
			return
		}
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if img, ok := c.(*ast.Image); ok {
				r.figure(img)
			}
		}
		return
	}
	wrap := r.wrapNext
	r.wrapNext = false
	if wrap {
		r.raw(`\opwrapstart `)
	}
	r.bidiPara(n)
	r.raw(`\par`)
	if wrap {
		r.raw(`\opwrapend`)
	}
	r.nl()
}

// wrapImage returns the image of a paragraph that is one half-width image
// (right-50, left-50) at the top level, followed by a paragraph of text:
// that paragraph runs beside it. Elsewhere (in a list, a notice, before a
// heading or a table) a half-width image stays a figure of its own.
func (r *writer) wrapImage(n ast.Node) *ast.Image {
	img, ok := n.FirstChild().(*ast.Image)
	if !ok || img.NextSibling() != nil || n.Parent() == nil || n.Parent().Kind() != ast.KindDocument {
		return nil
	}
	next, ok := n.NextSibling().(*ast.Paragraph)
	if !ok || r.onlyImages(next) || !parseHints(resolveEscapes(img.Title)).half {
		return nil
	}
	if _, ok := r.images[resolveEscapes(img.Destination)]; !ok {
		return nil
	}
	return img
}

// wrapFigure sets a half-width image with its caption for the next
// paragraph to run beside (\opwrapfig; the paragraph starts with
// \opwrapstart).
func (r *writer) wrapFigure(n *ast.Image) {
	h := parseHints(resolveEscapes(n.Title))
	call, ok := r.imageCall(n, `0.5\linewidth`)
	if !ok {
		r.figure(n)
		return
	}
	r.at(n)
	r.nl()
	r.raw(`\opwrapfig{` + string(h.align) + "}{" + call + "}{")
	if n.ChildCount() > 0 {
		r.raw(`\opcaption{`)
		r.caption = true
		r.bidiPara(n)
		r.caption = false
		r.raw("}")
	}
	r.raw("}\n")
	r.wrapNext = true
}

// onlyImages reports whether a paragraph holds images and nothing but
// white space: such images are set as figures, with their caption.
func (r *writer) onlyImages(n ast.Node) bool {
	if r.heading || r.cell || r.link || r.ulem > 0 {
		return false
	}
	found := false
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Image:
			found = true
		case *ast.Text:
			if strings.TrimSpace(r.d.textValue(c)) != "" {
				return false
			}
		default:
			return false
		}
	}
	return found
}

// anchor gives a heading a PDF destination named after its GitHub-style
// slug, so that `[x](#slug)` links reach it.
func (r *writer) anchor(h heading) {
	// GitHub's slug: lower case; letters (of any script), marks, digits,
	// underscores and hyphens kept; spaces become hyphens, everything
	// else goes.
	var sb strings.Builder
	for _, c := range strings.ToLower(h.plain) {
		switch {
		case unicode.In(c, unicode.L, unicode.M, unicode.N, unicode.Pc), c == '-':
			sb.WriteRune(c)
		case c == ' ':
			sb.WriteByte('-')
		}
		if sb.Len() >= 60 {
			break
		}
	}
	slug := r.bounds.freeSlug(sb.String(), r.anchors)
	dest := "op." + strconv.Itoa(len(r.anchors)+1)
	r.anchors[slug] = dest
	r.dests[h.node] = dest
}

// plainOf returns the plain text of a heading, computed by Parse.
func (r *writer) plainOf(n *ast.Heading) string {
	if plain, ok := r.bounds.headPlain(r.d)[n]; ok {
		return plain
	}
	return cleanLine(r.d.plain(n))
}

func (r *writer) headingBlock(h *ast.Heading) {
	if r.footnote || r.cell {
		r.raw(`\opminorheading{`)
		r.heading = true
		r.bidiPara(h)
		r.heading = false
		r.raw("}\n")
		return
	}
	r.headingAfterHeading(h)
	r.keepWithNext(h)
	i := max(0, h.Level-r.sectionBase)
	cmd := sectionCommands[min(i, len(sectionCommands)-1)]
	// The optional argument is the heading's copy for the table of
	// contents (see tocCopyOf) and, in \texorpdfstring, for the bookmark.
	r.raw(`\` + cmd + `[\texorpdfstring{`)
	r.heading = true
	r.tocCopyOf(h)
	r.raw(`}{`)
	plain := []rune(r.plainOf(h))
	if len(plain) > maxBookmark {
		plain = append(plain[:maxBookmark], '…')
	}
	r.text(string(plain), modePlain)
	r.raw(`}]{`)
	r.word = 0
	if dest, ok := r.dests[h]; ok {
		r.raw(`\opanchor{` + dest + `}`)
	}
	if k, ok := r.tocKeys[h]; ok {
		r.raw(`\opmark{` + k + `}`)
	}
	r.bidiPara(h)
	r.heading = false
	r.raw("}\n")
}

// tocDepth is how many heading levels the table of contents lists
// (\section to \subsubsection, LaTeX's default for articles).
const tocDepth = 3

// tocBlock writes the table of contents from the headings the writer
// knows in advance, in the same TeX run as the document: LaTeX's own
// \tableofcontents reads what the previous run wrote and so costs a
// second run, the larger part of a short document's time. Only the page
// numbers are unknown here. Each entry's page is a PDF form XObject
// (@opp<key>) that is placed now and defined when the page holding the
// heading is shipped out — the heading sets a mark (\opmark), and the
// shipout hook reads the page's first and last marks — and xdvipdfmx
// resolves the forward reference, as it does for "Page N of M". The
// numbers follow LaTeX's counters: every real heading steps its level and
// resets the deeper ones; with numbered, entries show the numbers.
func (r *writer) tocBlock(numbered bool) {
	r.tocKeys = make(map[*ast.Heading]string)
	var counters [len(sectionCommands)]int
	r.raw("\\begin{optoc}\n")
	for _, h := range r.d.heads {
		n := h.node
		if ast.Node(n) == r.skip || inFootnote(n) {
			continue // the title, or a minor heading (no \section)
		}
		i := min(max(0, n.Level-r.sectionBase), len(sectionCommands)-1)
		counters[i]++
		clear(counters[i+1:])
		if i >= tocDepth {
			continue
		}
		dest := r.dests[n]
		key := strings.TrimPrefix(dest, "op.")
		r.tocKeys[n] = key
		r.at(n)
		r.raw(`\opcontentsline{` + sectionCommands[i] + `}{`)
		if numbered {
			nums := make([]string, i+1)
			for j := range nums {
				nums[j] = strconv.Itoa(counters[j])
			}
			r.raw(`\numberline{` + strings.Join(nums, ".") + `}`)
		}
		r.tocCopyOf(n)
		r.raw(`}{` + key + `}{` + dest + `}`)
		r.nl()
	}
	r.raw("\\end{optoc}\n")
}

// tocCopyOf writes h's text as a moving argument: the entry of the table
// of contents, and the heading's optional argument, which LaTeX still
// writes to the .aux file, expanding every macro on the way. Many math
// commands do not survive that (x^\checkmark, \sum\limits, \widetilde),
// so formulas here have \protect before each control sequence. It writes
// no warnings: the heading itself reports them.
func (r *writer) tocCopyOf(h *ast.Heading) {
	heading := r.heading
	r.heading, r.quiet, r.tocCopy = true, true, true
	r.bidiPara(h)
	r.heading, r.quiet, r.tocCopy = heading, false, false
}

// inFootnote reports whether n is inside a footnote's text, where the
// writer sets headings as minor headings.
func inFootnote(n ast.Node) bool {
	for p := n.Parent(); p != nil; p = p.Parent() {
		if p.Kind() == extast.KindFootnote {
			return true
		}
	}
	return false
}

func (r *writer) thematicBreak(n ast.Node) {
	// In Outline's dialect `***` is a page break, `---` and `___` stay a
	// rule: the node does not say which, the source does.
	star := false
	if p := n.Pos(); p >= 0 && p < len(r.d.src) {
		line := r.d.src[p:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		star = bytes.IndexByte(line, '*') >= 0
	}
	if star && r.d.opts.outline() && r.listDepth == 0 && !r.boxed() {
		r.raw("\\opnewpage\n")
		return
	}
	r.raw("\\oprule\n")
}

// code writes a code block: highlighted Verbatim where a page may break,
// escaped monospace lines where Verbatim cannot go (footnotes, cells).
func (r *writer) code(lang, code string) {
	code = strings.TrimSuffix(code, "\n")
	if r.footnote || r.cell {
		r.codeLines(code, true)
		return
	}
	r.raw(HighlightCode(r.bounds.codeLang(cleanLine(lang)), cutLongLines(code)))
	r.nl()
}

// cutLongLines cuts code lines longer than maxCodeLine runes: such a line
// wraps anyway, and once highlighted it would overflow TeX's line buffer.
func cutLongLines(code string) string {
	if len(code) <= maxCodeLine {
		return code
	}
	var b strings.Builder
	for line := range strings.SplitSeq(code, "\n") {
		for utf8.RuneCountInString(line) > maxCodeLine {
			i, n := 0, 0
			for n < maxCodeLine {
				_, size := utf8.DecodeRuneInString(line[i:])
				i += size
				n++
			}
			b.WriteString(line[:i])
			b.WriteByte('\n')
			line = line[i:]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// codeLines writes lines as escaped monospace text, one output paragraph
// line per input line (mono: code; else raw HTML in the text font).
func (r *writer) codeLines(s string, mono bool) {
	s = strings.TrimSuffix(s, "\n")
	r.raw(`\opcodelines{`)
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			r.raw(`\opnl` + "\n")
		}
		r.word = 0
		if mono {
			r.raw(`\optt{`)
		} else {
			r.raw(`{`)
		}
		r.text(strings.TrimRight(line, " \t"), modeCode)
		r.raw(`}`)
	}
	r.raw("}\n")
}

func (r *writer) mathBlock(n *MathBlock) {
	f := n.Formula(r.d.src)
	if f == "" {
		return
	}
	if _, ok := n.PreviousSibling().(*MathBlock); ok {
		// Two displays in a row would touch: the second one's skip
		// above is the short one, after a paragraph of no text.
		r.raw(`\opmathgap` + "\n")
	}
	r.raw(`\[` + "\n")
	r.formula(f)
	r.raw("\n" + `\]` + "\n")
}

// formula writes a checked formula, without blank lines (an error in
// math) and with long lines broken between tokens.
func (r *writer) formula(f string) {
	first := true
	for line := range strings.SplitSeq(f, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if !first {
			r.raw("\n")
		}
		first = false
		for len(line) > softLine {
			cut := safeMathCut(line, softLine)
			r.raw(line[:cut] + "%\n")
			line = line[cut:]
		}
		r.raw(line)
	}
}

// protectMath puts \protect before every control sequence of a checked
// formula, so that the formula survives being written to a file: LaTeX's
// protected writes then keep each command as it is instead of expanding
// it.
func protectMath(f string) string {
	if strings.IndexByte(f, '\\') < 0 {
		return f
	}
	var b strings.Builder
	b.Grow(len(f) + 32)
	for i := 0; i < len(f); i++ {
		if f[i] != '\\' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		j := i + 1
		for j < len(f) && isLetter(f[j]) {
			j++
		}
		if j == i+1 {
			_, n := utf8.DecodeRuneInString(f[j:])
			j += n // a control symbol
		}
		b.WriteString(`\protect`)
		b.WriteString(f[i:j])
		i = j - 1
	}
	return b.String()
}

// safeMathCut returns a byte index near want at which a formula line can
// be split by `%` and a newline without changing its tokens: not after a
// backslash, not inside a control word, not inside a UTF-8 sequence.
func safeMathCut(s string, want int) int {
	for i := want; i < len(s); i++ {
		if !utf8.RuneStart(s[i]) {
			continue
		}
		prev := s[i-1]
		if prev == '\\' || isLetter(s[i]) && inControlWord(s, i) {
			continue
		}
		if s[i] == ' ' {
			continue // a space after the cut would be skipped; keep it before
		}
		return i
	}
	return len(s)
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// inControlWord reports whether position i continues a control word.
func inControlWord(s string, i int) bool {
	j := i - 1
	for j >= 0 && isLetter(s[j]) {
		j--
	}
	if j < 0 || s[j] != '\\' {
		return false
	}
	// s[j] is a backslash that starts a control word unless it is itself
	// escaped (an even run of backslashes before it).
	k := j - 1
	for k >= 0 && s[k] == '\\' {
		k--
	}
	return (j-k)%2 == 1
}

// nested writes an environment that counts as a list level (quote,
// toggle); beyond maxListDepth the content joins its parent's level.
func (r *writer) nested(env, arg string, n ast.Node) {
	if r.listDepth >= maxListDepth {
		r.blocks(n)
		return
	}
	r.listDepth++
	r.raw(`\begin{op` + env + `}` + arg + "\n")
	r.containerStart(n.FirstChild())
	r.blocks(n)
	r.nl()
	r.raw(`\end{op` + env + "}\n")
	r.listDepth--
}

var noticeLabels = map[string]string{"info": "Info", "warning": "Warning", "tip": "Tip", "success": "Success"}

func (r *writer) notice(n *Notice) {
	if n.Style == "layout" || n.Style == "layout_section" {
		// Outline's columns print one after another.
		r.blocks(n)
		return
	}
	label, ok := noticeLabels[n.Style]
	if !ok {
		n.Style, label = "info", "Info"
	}
	if r.frameDepth >= maxFrameDepth || r.footnote || r.cell {
		r.raw(`\opnoticelabel{` + n.Style + `}{` + label + "}\\par\n")
		r.blocks(n)
		return
	}
	r.frameDepth++
	r.raw(`\begin{opnotice}{` + n.Style + `}{` + label + "}\n")
	r.blocks(n)
	r.nl()
	r.raw("\\end{opnotice}\n")
	r.frameDepth--
}

func (r *writer) toggle(n *Toggle) {
	flat := r.listDepth >= maxListDepth || r.footnote || r.cell
	if flat {
		r.raw(`\optoggletitle{`)
	} else {
		r.listDepth++
		r.raw(`\begin{optoggle}{`)
	}
	body := ast.Node(n.FirstChild())
	switch title := body.(type) {
	case *ToggleTitle, *ast.Paragraph:
		// The title (on the fence line, or the first block inside a bare
		// fence, as Outline writes it) is an argument: footnotes in it
		// are set after the block, display math inline.
		r.args++
		r.bidiPara(title)
		r.args--
		body = title.NextSibling()
	}
	r.raw("}\n")
	if !flat {
		r.containerStart(body)
	}
	for c := body; c != nil; c = c.NextSibling() {
		r.block(c)
	}
	if flat {
		return
	}
	r.nl()
	r.raw("\\end{optoggle}\n")
	r.listDepth--
}

func (r *writer) list(n *ast.List) {
	ordered := n.IsOrdered()
	letters, lettered := r.letterList(n)
	if r.listDepth >= maxListDepth {
		// Flattened: each item is a paragraph with its label.
		num := n.Start
		for it := n.FirstChild(); it != nil; it = it.NextSibling() {
			r.at(it)
			r.nl()
			r.raw(`\opflatitem{`)
			if lettered && taskBox(it) == nil {
				r.text(letterLabel(letters.value+num-n.Start, letters.upper)+".", modeText)
			} else {
				r.itemLabel(it, ordered, num, n.Marker)
			}
			r.raw("}\n")
			r.itemBody(it)
			num++
		}
		return
	}
	if lettered {
		r.letterItems(n, letters)
		return
	}
	r.listDepth++
	env := "itemize"
	var opts []string
	if ordered {
		env = "enumerate"
		if n.Start != 1 {
			opts = append(opts, "start="+strconv.Itoa(n.Start))
		}
		if n.Marker == ')' {
			opts = append(opts, `label=\arabic*)`)
		}
	}
	if n.IsTight {
		opts = append(opts, "nosep")
	}
	r.raw(`\begin{` + env + `}`)
	if len(opts) > 0 {
		r.raw(`[` + strings.Join(opts, ",") + `]`)
	}
	r.raw("\n")
	for it := n.FirstChild(); it != nil; it = it.NextSibling() {
		r.at(it)
		r.nl()
		if box := taskBox(it); box != nil {
			r.raw(`\item[{`)
			r.itemLabel(it, ordered, 0, 0)
			r.raw(`}]`)
		} else {
			r.raw(`\item`)
		}
		r.raw("\n")
		r.containerStart(it.FirstChild())
		r.itemBody(it)
	}
	r.nl()
	r.raw(`\end{` + env + "}\n")
	r.listDepth--
}

// letterList reports whether n is a letter list of Outline's dialect (its
// first item's marker was a letter, see letterLists) and its first value.
func (r *writer) letterList(n *ast.List) (letterItem, bool) {
	if len(r.d.letters) == 0 || !n.IsOrdered() || n.FirstChild() == nil {
		return letterItem{}, false
	}
	p := r.d.blockPos(n.FirstChild())
	if p < 0 || p > len(r.d.src) {
		return letterItem{}, false
	}
	start := bytes.LastIndexByte(r.d.src[:p], '\n') + 1
	it, ok := r.d.letters[start]
	return it, ok
}

// letterItems writes a letter list: an enumerate whose labels the writer
// sets itself (a., b., …, z., aa., as Outline numbers them; LaTeX's \alph
// stops at z).
func (r *writer) letterItems(n *ast.List, first letterItem) {
	r.listDepth++
	r.raw(`\begin{enumerate}`)
	if n.IsTight {
		r.raw(`[nosep]`)
	}
	r.raw("\n")
	i := 0
	for it := n.FirstChild(); it != nil; it = it.NextSibling() {
		r.at(it)
		r.nl()
		r.raw(`\item[{`)
		if taskBox(it) != nil {
			r.itemLabel(it, true, 0, 0)
		} else {
			r.text(letterLabel(first.value+i, first.upper)+".", modeText)
		}
		r.raw("}]\n")
		r.itemBody(it)
		i++
	}
	r.nl()
	r.raw("\\end{enumerate}\n")
	r.listDepth--
}

// taskBox returns the check box of a task list item.
func taskBox(it ast.Node) *extast.TaskCheckBox {
	if p := it.FirstChild(); p != nil {
		if b, ok := p.FirstChild().(*extast.TaskCheckBox); ok {
			return b
		}
	}
	return nil
}

func (r *writer) itemLabel(it ast.Node, ordered bool, num int, marker byte) {
	switch box := taskBox(it); {
	case box != nil && box.IsChecked:
		r.text(boxChecked, modeText)
	case box != nil:
		r.text(boxUnchecked, modeText)
	case ordered:
		r.raw(strconv.Itoa(num))
		if marker == ')' {
			r.raw(")")
		} else {
			r.raw(".")
		}
	default:
		r.raw(`\textbullet`)
	}
}

func (r *writer) itemBody(it ast.Node) {
	for c := it.FirstChild(); c != nil; c = c.NextSibling() {
		r.block(c)
	}
}

// ---------------------------------------------------------------- inlines

func (r *writer) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(c)
		r.soft()
	}
}

// hardBreak ends a line inside a paragraph; where a line cannot end
// (headings, underlined text) it is a space.
func (r *writer) hardBreak() {
	r.bidiBreak()
	if r.heading || r.ulem > 0 {
		r.space()
		return
	}
	r.raw(`\opnl` + "\n")
	r.word = 0
}

func (r *writer) inline(n ast.Node) {
	r.laNode = n
	switch n := n.(type) {
	case *ast.Text:
		v := n.Segment.Value(r.d.src)
		if plainASCII(v) && !r.inRTL() {
			r.escBytes(v)
		} else {
			pieces := textPieces(v, r.d.opts.outline())
			for i, piece := range pieces {
				if i > 0 {
					r.hardBreak()
				}
				r.laStop = i < len(pieces)-1
				r.text(piece, modeText)
			}
			r.laStop = false
		}
		switch {
		case n.HardLineBreak():
			r.hardBreak()
		case n.SoftLineBreak():
			r.space()
		}
	case *ast.String:
		r.text(string(clean(n.Value)), modeText)
	case *extast.TaskCheckBox:
		// Shown as the item's label.
	default:
		r.inlineOther(n)
	}
}

// inlineOther writes every inline node but text.
func (r *writer) inlineOther(n ast.Node) {
	switch n := n.(type) {
	case *ast.CodeSpan:
		r.raw(`\optt{`)
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				b.Write(t.Segment.Value(r.d.src))
			}
		}
		r.text(strings.ReplaceAll(b.String(), "\n", " "), modeCode)
		r.raw(`}`)
	case *ast.Emphasis:
		if n.Level >= 2 {
			r.group(`\textbf{`, n)
		} else {
			r.group(`\emph{`, n)
		}
	case *Underline:
		r.decorated(`\opul`, n)
	case *extast.Strikethrough:
		r.decorated(`\opst`, n)
	case *Highlight:
		r.decorated(`\ophl`, n)
	case *Placeholder:
		r.decorated(`\opph`, n)
	case *MathInline:
		f := strings.TrimSpace(n.Formula)
		if f == "" {
			return
		}
		if r.tocCopy {
			f = protectMath(f)
		}
		if n.Display && !r.heading && r.ulem == 0 && !r.cell && r.args == 0 {
			r.raw(`\[`)
			r.formula(f)
			r.raw(`\]`)
		} else {
			r.raw(`\(`)
			r.formula(f)
			r.raw(`\)`)
		}
	case *emojiast.Emoji:
		r.text(string(n.Value.Unicode), modeText)
	case *ast.Link:
		r.linkNode(n)
	case *ast.AutoLink:
		r.autoLink(n)
	case *ast.Image:
		r.inlineImage(n)
	case *ast.RawHTML:
		var b strings.Builder
		for i := 0; i < n.Segments.Len(); i++ {
			s := n.Segments.At(i)
			b.Write(s.Value(r.d.src))
		}
		if r.inlineHTML(n, b.String()) {
			return
		}
		r.text(string(clean([]byte(b.String()))), modeCode)
	case *extast.FootnoteLink:
		r.footnoteRef(n)
	default:
		r.inlines(n)
	}
}

// group writes open, the children and a closing brace.
func (r *writer) group(open string, n ast.Node) {
	r.raw(open)
	r.args++
	r.inlines(n)
	r.args--
	r.raw(`}`)
}

// decorated writes underline, strike-through or highlight. These ulem
// commands set their argument word by word; anything but text inside them
// is put in braces, which ulem sets as one unbreakable box.
func (r *writer) decorated(cmd string, n ast.Node) {
	if r.heading {
		// ulem does not survive a moving argument; headings keep the text.
		r.inlines(n)
		return
	}
	if !r.frozen {
		r.laNode, r.laStop = n, false
		end := r.freeze(r.d.plain(n))
		defer end()
	}
	r.raw(cmd + `{`)
	r.ulem++
	r.args++
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c.(type) {
		case *ast.Text:
			r.inline(c)
		case *ast.Link, *ast.AutoLink, *ast.CodeSpan:
			if r.ulem > 1 {
				r.raw(`{`)
				r.inline(c)
				r.raw(`}`)
				break
			}
			// A link or code span would be one unbreakable box in ulem,
			// possibly wider than the line: it is set between two
			// decorated runs instead, not decorated itself.
			r.raw(`}`)
			r.ulem--
			r.inline(c)
			r.ulem++
			r.raw(cmd + `{`)
		default:
			// A box cannot break anyway, and ulem's \penalty inside a
			// group of the box unbalances its groups: no \opbr in it.
			saved := r.firstBreak
			r.firstBreak = 0
			r.raw(`{`)
			r.inline(c)
			r.raw(`}`)
			r.firstBreak = saved
		}
		r.soft()
	}
	r.args--
	r.ulem--
	r.raw(`}`)
}

// footnoteRef typesets a footnote at its first reference. Numbers are
// given here, in reference order, and written out (\footnote[3]{…}), so
// that a note can also be typeset later: where \footnote cannot go (a
// heading, a table cell, underlined text, a frame, a caption, a link or
// another footnote) the reference prints its mark and the text follows as
// \footnotetext once the block is done. A second reference prints the
// mark only.
func (r *writer) footnoteRef(n *extast.FootnoteLink) {
	fn := r.d.footnotes[n.Index]
	if fn == nil || r.quiet {
		// The bookmark and contents copy of a heading, the repeated
		// table header: no marks.
		return
	}
	if num, ok := r.fnNumber[n.Index]; ok {
		r.raw(`\opfnmark{` + strconv.Itoa(num) + `}`)
		return
	}
	r.fnCount++
	num := r.fnCount
	r.fnNumber[n.Index] = num
	if r.heading || r.cell || r.ulem > 0 || r.footnote || r.frameDepth > 0 || r.caption || r.link || r.args > 0 {
		r.raw(`\opfnmark{` + strconv.Itoa(num) + `}`)
		r.pending = append(r.pending, pendingNote{num, fn})
		return
	}
	r.raw(`\footnote[` + strconv.Itoa(num) + `]{`)
	r.noteBody(fn)
	r.raw(`}`)
}

type pendingNote struct {
	num int
	fn  *extast.Footnote
}

func (r *writer) noteBody(fn *extast.Footnote) {
	saved := r.cur
	// The note is text of its own, even when its mark stands inside a
	// right-to-left stretch (which goes on after it).
	savedBidi := r.saveBidi()
	r.bidi, r.rtlOpen, r.rtlPrev = false, false, fontNone
	defer r.restoreBidi(savedBidi)
	r.footnote = true
	for c := fn.FirstChild(); c != nil; c = c.NextSibling() {
		r.block(c)
	}
	r.footnote = false
	r.cur = saved
}

// flushNotes typesets the footnotes whose references could not hold them,
// once the writer is back where \footnotetext may go.
func (r *writer) flushNotes() {
	if r.heading || r.cell || r.ulem > 0 || r.footnote || r.frameDepth > 0 || r.caption || r.link || r.args > 0 {
		return
	}
	for len(r.pending) > 0 {
		p := r.pending[0]
		r.pending = r.pending[1:]
		r.nl()
		r.raw(`\footnotetext[` + strconv.Itoa(p.num) + `]{`)
		r.noteBody(p.fn)
		r.raw("}\n")
	}
}

// ---------------------------------------------------------------- links

// target is where a link goes: an external URL (already safe for \href),
// an internal destination, or nothing.
type target struct {
	url, dest string
}

// scheme returns the URL scheme of u ("" when u has none).
func scheme(u string) string {
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case isLetter(c):
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '.' || c == '-'):
		case i > 0 && c == ':':
			return u[:i]
		default:
			return ""
		}
	}
	return ""
}

// resolveLink decides what a link destination may become. Only http,
// https and mailto keep their target, plus Outline's relative document,
// collection and attachment paths when the Outline URL is known; a
// fragment reaches a heading of this document.
func (r *writer) resolveLink(dest string) (target, string) {
	dest = strings.TrimSpace(dest)
	if dest == "" {
		return target{}, "empty link target"
	}
	if strings.HasPrefix(dest, "#") {
		if name, ok := r.anchors[dest[1:]]; ok {
			return target{dest: name}, ""
		}
		// A link to a non-ASCII heading may be percent-encoded.
		if frag, err := url.PathUnescape(dest[1:]); err == nil {
			if name, ok := r.anchors[strings.ToLower(frag)]; ok {
				return target{dest: name}, ""
			}
		}
		return target{}, fmt.Sprintf("link to %q: no heading has this name", shorten(dest))
	}
	if sc := scheme(dest); sc != "" {
		switch strings.ToLower(sc) {
		case "http", "https", "mailto":
			return target{url: dest}, ""
		}
		return target{}, fmt.Sprintf("link to %q kept as text: only http, https and mailto links are allowed", shorten(dest))
	}
	if strings.HasPrefix(dest, "/doc/") || strings.HasPrefix(dest, "/collection/") || strings.HasPrefix(dest, "/api/attachments.redirect") {
		if base := strings.TrimRight(r.d.opts.OutlineURL, "/"); base != "" && scheme(base) != "" {
			return target{url: base + dest}, ""
		}
	}
	return target{}, fmt.Sprintf("link to %q kept as text: relative links have no target in a PDF", shorten(dest))
}

func shorten(s string) string {
	if utf8.RuneCountInString(s) > 80 {
		return string([]rune(s)[:80]) + "…"
	}
	return s
}

var (
	attachmentRE = regexp.MustCompile(`^(.*\S)\s+(\d{1,15})$`)
	mediaRE      = regexp.MustCompile(`^(.*\S)\s+(?:pdf:(\d{1,15})|\d{1,6}x\d{1,6})$`)
)

func (r *writer) linkNode(n *ast.Link) {
	dest := resolveEscapes(n.Destination)
	lower := strings.ToLower(dest)
	if strings.HasPrefix(lower, "mention:") || strings.HasPrefix(lower, "date:") {
		// Outline mention, or a date chip ([1 March](date:2026-03-01)):
		// the text the reader saw, no target.
		r.inlines(n)
		return
	}
	if strings.Contains(lower, "/api/attachments.redirect") {
		// Outline's PDF ([report pdf:102400](…)) and video ([clip.mp4
		// 640x480](…)) nodes: the name and what it is, not the raw sizes.
		plain := r.d.plain(n)
		if m := mediaRE.FindStringSubmatch(plain); m != nil {
			t, problem := r.resolveLink(dest)
			if problem != "" {
				r.warn(n, "%s", problem)
			}
			label := strings.TrimSpace(m[1]) + " (video)"
			if m[2] != "" {
				size, _ := strconv.ParseInt(m[2], 10, 64)
				label = strings.TrimSpace(m[1]) + " (PDF, " + formatSize(size) + ")"
			}
			r.hyper(n, t, func() { r.text(label, modeText) })
			return
		}
		if m := attachmentRE.FindStringSubmatch(plain); m != nil {
			size, _ := strconv.ParseInt(m[2], 10, 64)
			t, problem := r.resolveLink(dest)
			if problem != "" {
				r.warn(n, "%s", problem)
			}
			label := m[1] + " (" + formatSize(size) + ")"
			r.hyper(n, t, func() { r.text(label, modeText) })
			return
		}
	}
	t, problem := r.resolveLink(dest)
	if problem != "" {
		r.warn(n, "%s", problem)
	}
	r.hyper(n, t, func() { r.inlines(n) })
}

func (r *writer) autoLink(n *ast.AutoLink) {
	label := string(clean(n.Label(r.d.src)))
	url := string(clean(n.URL(r.d.src)))
	if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(strings.ToLower(url), "mailto:") {
		url = "mailto:" + url
	}
	t, problem := r.resolveLink(url)
	if problem != "" {
		r.warn(n, "%s", problem)
	}
	r.hyper(n, t, func() {
		r.raw(`\opurl{`)
		r.urlBreaks = true
		r.text(label, modeCode)
		r.urlBreaks = false
		r.raw(`}`)
	})
}

// hyper writes a link around body, or body alone when there is no target
// or the link is inside another link.
func (r *writer) hyper(n ast.Node, t target, body func()) {
	switch {
	case r.link || t.url == "" && t.dest == "":
		body()
	case t.dest != "":
		r.link = true
		r.raw(`\hyperlink{` + t.dest + `}{`)
		r.args++
		body()
		r.args--
		r.raw(`}`)
		r.link = false
	default:
		u := hrefURL(t.url)
		if len(u) > maxURLBytes {
			r.warn(n, "link target of %d bytes kept as text: at most %d", len(t.url), maxURLBytes)
			body()
			return
		}
		r.link = true
		r.raw(`\href{`)
		// hyperref drops a `%` and newline inside the URL, both at top
		// level and in an argument, so long URLs are cut into lines.
		for len(u) > 200 {
			cut := 200
			for cut < len(u) && (u[cut-1] == '\\' || u[cut] == '#' || u[cut] == '%') {
				cut++
			}
			r.raw(u[:cut] + "%\n")
			u = u[cut:]
		}
		r.raw(u + `}{`)
		r.args++
		body()
		r.args--
		r.raw(`}`)
		r.link = false
	}
}

// hrefURL makes a URL safe for \href: characters that are special to TeX
// or outside printable ASCII are percent-encoded (so a brace, backslash,
// caret or tilde can never reach TeX), the first `#`, `%`, `&` and `_` are
// written as hyperref's \#, \%, \& and \_, and a `%` that starts no
// escape becomes %25.
func hrefURL(u string) string {
	var b strings.Builder
	hash := false
	for i := 0; i < len(u); i++ {
		c := u[i]
		switch {
		case c == '#' && !hash:
			// The fragment; a later # is not a URL character (and
			// hyperref would end the link there): it is encoded below.
			hash = true
			b.WriteString(`\#`)
		case c == '&':
			b.WriteString(`\&`)
		case c == '_':
			b.WriteString(`\_`)
		case c == '%':
			if i+2 < len(u) && isHex(u[i+1]) && isHex(u[i+2]) {
				b.WriteString(`\%`)
			} else {
				b.WriteString(`\%25`)
			}
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			strings.IndexByte("-._:/?=@!'*+,;", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\%%%02X`, c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// formatSize prints an attachment size the way Outline shows it.
func formatSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1024*1024:
		return fmt.Sprintf("%d KB", (n+512)/1024)
	case n < 1024*1024*1024:
		return strconv.FormatFloat(float64(n)/(1024*1024), 'f', 1, 64) + " MB"
	default:
		return strconv.FormatFloat(float64(n)/(1024*1024*1024), 'f', 1, 64) + " GB"
	}
}

// ---------------------------------------------------------------- images

// safeFile reports whether an image file name is one the images stage
// makes: [A-Za-z0-9._-], not starting with a dot, no "..".
func safeFile(name string) bool {
	if name == "" || len(name) > 200 || name[0] == '.' || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(isLetter(c) || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// imageHints reads Outline's image title: " =WxH" (pixels), right-50,
// left-50, full-width and source=…; anything else is an ordinary title.
type imageHints struct {
	w, h       float64 // pixels, 0 when not given
	align      byte    // 'c', 'l' or 'r'
	half, full bool
}

var sizeRE = regexp.MustCompile(`^=(\d{0,6})x(\d{0,6})$`)

func parseHints(title string) imageHints {
	h := imageHints{align: 'c'}
	for _, f := range strings.Fields(title) {
		switch {
		case sizeRE.MatchString(f):
			m := sizeRE.FindStringSubmatch(f)
			h.w, _ = strconv.ParseFloat(m[1], 64)
			h.h, _ = strconv.ParseFloat(m[2], 64)
		case f == "right-50":
			h.align, h.half = 'r', true
		case f == "left-50":
			h.align, h.half = 'l', true
		case f == "full-width":
			h.full = true
		}
	}
	return h
}

// imageSize returns the size (in pt, 0 for "as large as fits") an image
// asks for: the title's hint (pixels at 96 dpi, so × 0.75), else its
// intrinsic size.
func imageSize(img Image, h imageHints) (w, ht float64) {
	aspect := 0.0
	if img.Width > 0 && img.Height > 0 {
		aspect = img.Height / img.Width
	}
	switch {
	case h.w > 0 && h.h > 0:
		return h.w * 0.75, h.h * 0.75
	case h.w > 0:
		w = h.w * 0.75
		return w, w * aspect
	case h.h > 0 && aspect > 0:
		ht = h.h * 0.75
		return ht / aspect, ht
	case img.Width > 0 && img.Height > 0:
		scale := 0.75
		if strings.HasSuffix(strings.ToLower(img.File), ".pdf") {
			scale = 1 // PDF sizes are points already
		}
		return img.Width * scale, img.Height * scale
	}
	return 0, 0
}

// imageCall returns \opimg{max width}{width}{height}{file}: the macro
// bounds the size by the line width and 0.75\textheight and keeps the
// aspect ratio. ok is false when the image is not available.
func (r *writer) imageCall(n *ast.Image, maxWidth string) (string, bool) {
	url := resolveEscapes(n.Destination)
	img, ok := r.images[url]
	if !ok || !safeFile(img.File) {
		return "", false
	}
	h := parseHints(resolveEscapes(n.Title))
	w, ht := imageSize(img, h)
	width, height := `\linewidth`, `0.75\textheight`
	if w > 0 && !h.full {
		width = strconv.FormatFloat(w, 'f', 2, 64) + "pt"
	}
	if ht > 0 && !h.full {
		height = strconv.FormatFloat(ht, 'f', 2, 64) + "pt"
	}
	return `\opimg{` + maxWidth + `}{` + width + `}{` + height + `}{` + img.File + `}`, true
}

// figure sets an image on its own: unbreakable, never floating, scaled to
// fit, with its caption under it.
func (r *writer) figure(n *ast.Image) {
	h := parseHints(resolveEscapes(n.Title))
	maxWidth := `\linewidth`
	if h.half {
		maxWidth = `0.5\linewidth`
	}
	call, ok := r.imageCall(n, maxWidth)
	r.at(n)
	r.nl()
	if !ok {
		r.raw(`\opmissing{`)
		r.bidiPara(n)
		r.raw("}\\par\n")
		return
	}
	r.raw(`\begin{opfigure}{` + string(h.align) + "}\n" + call + "\n")
	if n.ChildCount() > 0 {
		r.raw(`\opcaption{`)
		r.caption = true
		r.bidiPara(n)
		r.caption = false
		r.raw("}\n")
	}
	r.raw("\\end{opfigure}\n")
}

// inlineImage sets an image inside text (a link, a cell): scaled to the
// line, without caption. In a heading only its text is shown.
func (r *writer) inlineImage(n *ast.Image) {
	call, ok := r.imageCall(n, `\linewidth`)
	if !ok || r.heading {
		r.raw(`\opmissing{`)
		r.inlines(n)
		r.raw(`}`)
		return
	}
	r.raw(call)
}
