package markdown

// The front of the body: document information, title block and table
// of contents.

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/outprint/outprint/internal/script"
	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
)

// front writes what comes before the content: document information,
// section numbering, the title block and, when asked for and there are
// headings, the table of contents (reported by the result).
func (r *writer) front(meta Meta, headings int) (toc bool) {
	r.docinfo(meta)
	if r.docRTL {
		// Title block, contents, footer and tables right to left.
		r.raw("\\opdocrtl\n")
		r.dir = true
	}
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
	toc = meta.TOC && headings > 0
	if toc {
		r.tocBlock(meta.NumberSections)
	}
	return toc
}

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

// macro writes \name{text} for a non-empty text: a line of the title
// block, a paragraph of its own in its own direction.
func (r *writer) macro(name, text string) {
	if text == "" {
		return
	}
	r.raw(`\` + name + `{`)
	saved := r.saveBidi()
	r.keepDir(func() {
		if rtl, ok := script.FirstStrong(text); ok {
			r.setDir(rtl)
		}
		r.rtlPara = r.dir
		r.text(text, modeText)
		r.endEmb()
	})
	r.restoreBidi(saved)
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
