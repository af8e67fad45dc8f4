// Package markdown turns Markdown (CommonMark, GitHub tables,
// strikethrough, task lists, autolinks, footnotes and the Outline wiki's
// dialect) into LaTeX for XeLaTeX, in pure Go.
//
// It makes two strings. Preamble depends only on a Profile (paper and the
// scripts a document uses), so a TeX process can load it before the
// document is known. Document.LaTeX makes the body: document information,
// title block, optional table of contents and the content. Every string
// that comes from a user is escaped on the way out, so user text can never
// become a TeX command; formulas are the one place where user text reaches
// TeX as TeX, and they are checked against an allowlist (texmath.Check) when
// the document is parsed.
package markdown

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	emojiast "github.com/yuin/goldmark-emoji/ast"
	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/script"
	"github.com/outprint/outprint/internal/texmath"
)

// Options tune how a document is read.
type Options struct {
	// LineOffset is the number of lines before src in the original file
	// (front matter), added to every line number reported.
	LineOffset int
	// OutlineURL, when set (e.g. https://wiki.example.com), makes Outline's
	// relative /doc/… and /collection/… links and attachment links
	// absolute; without it they print as text.
	OutlineURL string
	// Dialect selects the rules the text is read with (outline.go):
	// DialectCommonMark when empty.
	Dialect Dialect
	// Diagram, when set, says which fenced blocks are diagrams to draw
	// (Diagrams) by the first word of their info string; without it every
	// fenced block is code.
	Diagram func(lang string) bool
}

// ImageRef is an image the document references.
type ImageRef struct {
	URL, Alt, Title string
	Line            int // 1-based, in the original file
}

// Image is an image as the TeX folder holds it.
type Image struct {
	File   string  // base name inside the TeX folder, [A-Za-z0-9._-] only
	Width  float64 // intrinsic width in px (PNG/JPEG) or pt (PDF); 0 if unknown
	Height float64 // intrinsic height, same unit
	// Page is the page of a PDF File to show (a diagram's: a document's
	// diagrams share one PDF); 0 and 1 are the first.
	Page int
}

// Document is a parsed Markdown document.
type Document struct {
	src       []byte
	root      ast.Node
	opts      Options
	lineStart []int // byte offset of each line of src

	images    []ImageRef
	first     string // plain text of the first heading
	titleH1   bool   // the first block is a level-1 heading
	headings  int
	scripts   script.Set
	footnotes map[int]*extast.Footnote
	heads     []heading // every heading, in order
	// letters holds the letter-list markers of the Outline dialect, by
	// byte offset of their line (letterLists).
	letters map[int]letterItem
	emoji   []string // distinct emoji names, at most MaxEmoji (emoji.go)
	// diagrams are the fenced blocks to draw (diagrams.go), and
	// diagramIndex each one's place among them.
	diagrams     []DiagramRef
	diagramIndex map[*ast.FencedCodeBlock]int
}

// heading is a heading with its plain text, which the writer needs twice
// (bookmark, anchor name).
type heading struct {
	node  *ast.Heading
	plain string
}

// Parse reads a Markdown document (without front matter). It fails for
// formulas outside the allowlist and scripts no font has: a *limits.Error
// (422) that lists every one with its line; the Document read is returned
// with that error, so that the caller can check its images too and report
// every problem at once (it must not be written). It fails with no
// Document for nesting too deep to read. Parse is cheap and runs before
// images are fetched.
func Parse(src []byte, opts Options) (*Document, error) {
	src = clean(src)
	d := &Document{opts: opts}
	if opts.outline() {
		src, d.letters = letterLists(src)
	}
	d.src = src
	d.lineStart = append(d.lineStart, 0)
	for i, c := range src {
		if c == '\n' {
			d.lineStart = append(d.lineStart, i+1)
		}
	}
	pc := parser.NewContext()
	d.root = parserFor(opts.Dialect).Parse(text.NewReader(src), parser.WithContext(pc))
	if off, ok := pc.Get(tooDeepKey).(int); ok {
		return nil, limits.Invalid(d.tooDeepProblem(off))
	}
	if n := inlineTooDeep(d.root); n != nil {
		return nil, limits.Invalid(d.inlineTooDeepProblem(n))
	}

	firstBlock := d.root.FirstChild()
	if h, ok := firstBlock.(*ast.Heading); ok && h.Level == 1 {
		d.titleH1 = true
	}
	d.footnotes = map[int]*extast.Footnote{}
	s := &survey{d: d, firstBlock: firstBlock}
	_ = ast.Walk(d.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			s.visit(n)
		}
		return ast.WalkContinue, nil
	})
	chars := nonASCII(src) + s.extra.String()
	d.scripts = script.Of(chars)
	d.emoji = emojiNames(chars, MaxEmoji)
	problems := append(s.problems, d.unprintable()...)
	if len(problems) > 0 {
		sort.SliceStable(problems, func(i, j int) bool { return problems[i].Line < problems[j].Line })
		return d, limits.Invalid(limits.CapProblems(problems, s.uncounted)...)
	}
	return d, nil
}

// survey is Parse's one walk over the document: what it records on the
// Document as it goes, the characters the writer will add (emoji, check
// boxes) and the formulas refused.
type survey struct {
	d          *Document
	firstBlock ast.Node
	sawHeading bool
	extra      strings.Builder // characters the writer adds (emoji, check boxes)
	problems   []limits.Problem
	uncounted  int // problems beyond limits.MaxProblems, counted only
}

// report keeps a problem, or counts it past limits.MaxProblems.
func (s *survey) report(p limits.Problem) {
	if len(s.problems) < limits.MaxProblems {
		s.problems = append(s.problems, p)
	} else {
		s.uncounted++
	}
}

// visit notes one node as the walk enters it.
func (s *survey) visit(n ast.Node) {
	d := s.d
	switch n := n.(type) {
	case *ast.Heading:
		s.heading(n)
	case *ast.Image:
		d.images = append(d.images, ImageRef{
			URL:   resolveEscapes(n.Destination),
			Alt:   cleanLine(d.plain(n)),
			Title: cleanLine(resolveEscapes(n.Title)),
			Line:  d.line(n.Pos()),
		})
	case *MathInline:
		if err := texmath.Check(n.Formula); err != nil {
			s.report(mathProblem(d.line(n.Offset), n.Formula, err))
		}
	case *MathBlock:
		if f := n.Formula(d.src); f != "" || n.closed {
			if err := texmath.Check(f); err != nil {
				s.report(mathProblem(d.line(d.blockPos(n)), f, err))
			}
		}
	case *emojiast.Emoji:
		s.extra.WriteString(string(n.Value.Unicode))
	case *extast.TaskCheckBox:
		s.extra.WriteString(boxUnchecked + boxChecked)
	case *extast.Footnote:
		d.footnotes[n.Index] = n
	case *ast.FencedCodeBlock:
		d.noteDiagram(n)
	}
}

// heading records a heading: its plain text, the first heading's as the
// document's, and the count of the headings the body shows (a level-1
// heading that opens the document is its title).
func (s *survey) heading(n *ast.Heading) {
	d := s.d
	plain := cleanLine(d.plain(n))
	d.heads = append(d.heads, heading{n, plain})
	if !s.sawHeading {
		s.sawHeading = true
		d.first = plain
	}
	if !(d.titleH1 && ast.Node(n) == s.firstBlock) {
		d.headings++
	}
}

const (
	boxUnchecked = "☐"
	boxChecked   = "☑"
)

func mathProblem(line int, formula string, err error) limits.Problem {
	f := []rune(cleanLine(formula))
	if len(f) > 60 {
		f = append(f[:60], '…')
	}
	return limits.Problem{
		Source:  limits.SourceDocument,
		Code:    limits.CodeMath,
		Line:    line,
		Message: fmt.Sprintf(`formula "%s" is not allowed: %v`, string(f), err),
	}
}

// nonASCII returns the runs of non-ASCII characters of src, each with the
// ASCII character before and after it: all ScriptsOf needs, since ASCII
// is the main font's, at a fraction of the cost on mostly Latin text.
func nonASCII(src []byte) string {
	var b strings.Builder
	for i := 0; i < len(src); {
		if src[i] < 0x80 {
			i++
			continue
		}
		start := i
		if start > 0 {
			start--
		}
		for i < len(src) && (src[i] >= 0x80 || i+1 < len(src) && src[i+1] >= 0x80) {
			i++
		}
		end := min(i+1, len(src))
		b.Write(src[start:end])
		b.WriteByte('\n')
	}
	return b.String()
}

// line turns a byte offset of src into a line of the original file.
func (d *Document) line(off int) int {
	if off < 0 {
		return 0
	}
	i := sort.Search(len(d.lineStart), func(i int) bool { return d.lineStart[i] > off })
	return i + d.opts.LineOffset
}

// blockPos returns the byte offset where a block starts.
func (d *Document) blockPos(n ast.Node) int {
	if n.Type() == ast.TypeInline {
		return n.Pos()
	}
	if l := n.Lines(); l != nil && l.Len() > 0 {
		return l.At(0).Start
	}
	if p := n.Pos(); p >= 0 {
		return p
	}
	for c := n.FirstChild(); c != nil; c = c.FirstChild() {
		if p := d.blockPos(c); p >= 0 {
			return p
		}
	}
	return -1
}

// Images returns the images the document references, in order.
func (d *Document) Images() []ImageRef { return append([]ImageRef(nil), d.images...) }

// FirstHeading returns the plain text of the first heading, "" if none.
func (d *Document) FirstHeading() string { return d.first }

// Headings counts the headings the body will show: a level-1 heading that
// opens the document is taken as its title and not counted.
func (d *Document) Headings() int { return d.headings }

// Scripts returns the scripts (beyond Latin, Greek and Cyrillic) the
// document's text needs fonts for.
func (d *Document) Scripts() script.Set { return d.scripts }

// plain returns the text of n's inline content without markup.
func (d *Document) plain(n ast.Node) string {
	var b strings.Builder
	d.plainTo(&b, n)
	return b.String()
}

func (d *Document) plainTo(b *strings.Builder, n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			d.plainText(b, c)
		case *ast.String:
			b.Write(c.Value)
		case *ast.CodeSpan:
			for t := c.FirstChild(); t != nil; t = t.NextSibling() {
				if tt, ok := t.(*ast.Text); ok {
					b.Write(tt.Segment.Value(d.src))
				}
			}
		case *MathInline:
			b.WriteString(c.Formula)
		case *emojiast.Emoji:
			b.WriteString(string(c.Value.Unicode))
		case *ast.RawHTML:
			if raw := d.rawHTML(c); !isFormattingHTML(raw) {
				b.WriteString(raw)
			}
		case *extast.FootnoteLink, *extast.TaskCheckBox:
		case *ast.AutoLink:
			b.Write(c.Label(d.src))
		default:
			d.plainTo(b, c)
		}
	}
}

// plainText writes a text node's text, its line break as a space.
func (d *Document) plainText(b *strings.Builder, t *ast.Text) {
	if v := t.Segment.Value(d.src); plainASCII(v) {
		b.Write(v)
	} else {
		b.WriteString(d.textValue(t))
	}
	if t.SoftLineBreak() || t.HardLineBreak() {
		b.WriteByte(' ')
	}
}

// rawHTML is the source of an inline HTML node, its segments joined.
func (d *Document) rawHTML(n *ast.RawHTML) string {
	var raw strings.Builder
	for i := 0; i < n.Segments.Len(); i++ {
		s := n.Segments.At(i)
		raw.Write(s.Value(d.src))
	}
	return raw.String()
}

// textValue returns the text of a Text node with backslash escapes and
// entity references resolved and Outline's literal `\n` read as a space.
func (d *Document) textValue(t *ast.Text) string {
	return strings.Join(textPieces(t.Segment.Value(d.src), d.opts.outline()), " ")
}

// textPieces resolves backslash escapes and entity references in the raw
// text of a Text node and, in Outline's dialect (hardBreaks), splits it at
// Outline's hard breaks: a literal backslash followed by `n` that is not
// itself escaped. In CommonMark that is a backslash and an n.
func textPieces(v []byte, hardBreaks bool) []string {
	if bytes.IndexByte(v, '\\') < 0 && bytes.IndexByte(v, '&') < 0 {
		return []string{string(v)}
	}
	var pieces []string
	var b []byte
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case hardBreaks && c == '\\' && i+1 < len(v) && v[i+1] == 'n':
			pieces = append(pieces, string(clean(b)))
			b = b[:0]
			i++
		case c == '\\' && i+1 < len(v) && util.IsPunct(v[i+1]):
			b = append(b, v[i+1])
			i++
		case c == '&':
			end := bytes.IndexByte(v[i:min(len(v), i+40)], ';')
			if end < 0 {
				b = append(b, c)
				continue
			}
			ref := v[i : i+end+1]
			r := util.ResolveEntityNames(resolveNumericReferences(ref))
			if bytes.Equal(r, ref) {
				b = append(b, c)
				continue
			}
			b = append(b, r...)
			i += end
		default:
			b = append(b, c)
		}
	}
	return append(pieces, string(clean(b)))
}

// resolveEscapes resolves CommonMark backslash escapes and entity and
// numeric character references, and cleans the result again: a reference
// can name any character, including those clean removes.
func resolveEscapes(v []byte) string {
	v = util.UnescapePunctuations(v)
	v = resolveNumericReferences(v)
	v = util.ResolveEntityNames(v)
	return string(clean(v))
}

// unprintable returns a problem for each script of the document that no
// installed font draws, at its first letter: printing its letters as
// U+FFFD would lose the text without a word.
func (d *Document) unprintable() []limits.Problem {
	var out []limits.Problem
	seen := map[string]bool{}
	for i := 0; i < len(d.src); {
		if d.src[i] < 0x80 {
			i++
			continue
		}
		r, n := utf8.DecodeRune(d.src[i:])
		if unicode.IsLetter(r) && !script.Drawable(r) {
			name := scriptName(r)
			if !seen[name] {
				seen[name] = true
				out = append(out, limits.Problem{
					Source:  limits.SourceDocument,
					Code:    limits.CodeInvalid,
					Line:    d.line(i),
					Message: fmt.Sprintf("no installed font has the %s script (%q, U+%04X)", name, string(r), r),
				})
			}
		}
		i += n
	}
	return out
}

// scriptName returns the name of r's Unicode script.
func scriptName(r rune) string {
	names := make([]string, 0, len(unicode.Scripts))
	for name := range unicode.Scripts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name != "Common" && name != "Inherited" && unicode.Is(unicode.Scripts[name], r) {
			return strings.ReplaceAll(name, "_", " ")
		}
	}
	return "unknown"
}
