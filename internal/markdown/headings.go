package markdown

// Headings: their PDF destinations (GitHub-style slugs) and sectioning
// commands.

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/yuin/goldmark/ast"
)

// prepareHeadings decides which heading is the title block's (the first
// level-1 heading when it says the same), which level is \section, and
// each heading's PDF destination. It returns the number of headings the
// body shows.
func (r *writer) prepareHeadings(meta Meta) int {
	d := r.d
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
	return headings
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
		r.setDir(r.dirOf(h))
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
	r.setDir(r.dirOf(h))
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
