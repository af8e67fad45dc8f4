// Package collection joins the documents of an Outline collection into one
// Markdown document in Outline's dialect, so that a whole collection prints
// as one PDF in one TeX run: one title page, one table of contents over
// every document with its nesting, each document a chapter.
//
// Each document's title becomes a heading of the level of its depth in the
// collection's tree (1 to 3, the levels the table of contents lists), and
// the document's own headings move below level 3, out of the contents.
// The contents have a page of their own and every top-level document
// starts a page. Footnote labels are made unique
// per document, and a code fence a document leaves open is closed, so that
// one document cannot change how the next one reads.
package collection

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/markdown"
	"github.com/outprint/outprint/internal/outline"
)

// Doc is one document of a collection, in the tree's order.
type Doc struct {
	Title string
	Depth int    // 0 for a document at the top of the collection
	Text  string // Markdown in Outline's dialect
}

// Skipped is a document of the collection that is not printed (the reader
// may read but not download it), listed on the contents page.
type Skipped struct {
	Title string
	Why   string
}

// Read reads the documents of a collection's tree in order through
// document (outline.Client.Document as the reader): those the reader may
// download become chapters (Depth their nesting), those they may only read
// are skipped with the reason, and one they cannot read at all (access
// changed since the tree was read, or deleted meanwhile) is left out.
// Reading stops with 413 once the texts pass limits.MaxCollectionBytes;
// any other error of Outline stops it too.
func Read(ctx context.Context, tree []outline.TreeNode, document func(ctx context.Context, id string) (*outline.Document, error)) ([]Doc, []Skipped, error) {
	r := reader{ctx: ctx, document: document}
	err := r.walk(tree, 0)
	return r.docs, r.skipped, err
}

// reader is one walk of Read.
type reader struct {
	ctx      context.Context
	document func(ctx context.Context, id string) (*outline.Document, error)
	docs     []Doc
	skipped  []Skipped
	total    int
}

func (r *reader) walk(nodes []outline.TreeNode, depth int) error {
	for _, n := range nodes {
		doc, err := r.document(r.ctx, n.ID)
		switch {
		case errors.Is(err, outline.ErrNoDownload):
			r.skipped = append(r.skipped, Skipped{Title: doc.Title, Why: "you may read it but not download it"})
		case errors.Is(err, outline.ErrDeleted), errors.Is(err, outline.ErrForbidden), errors.Is(err, outline.ErrNotFound):
		case err != nil:
			return err
		default:
			r.total += len(doc.Text)
			if r.total > limits.MaxCollectionBytes {
				return limits.TooLargeThan(int64(r.total), limits.MaxCollectionBytes)
			}
			r.docs = append(r.docs, Doc{Title: doc.Title, Depth: depth, Text: doc.Text})
		}
		if err := r.walk(n.Children, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// Check applies the single-document limits to each document: its Markdown
// size (413 too_large), its formulas and its number of images (422), each
// problem naming the document. It parses each document once.
func Check(docs []Doc) error {
	var problems []limits.Problem
	for _, d := range docs {
		if len(d.Text) > limits.MaxMarkdownBytes {
			return limits.TooLargeThan(int64(len(d.Text)), limits.MaxMarkdownBytes)
		}
		md, err := markdown.Parse([]byte(d.Text), markdown.Options{Dialect: markdown.DialectOutline})
		if le, ok := err.(*limits.Error); ok {
			for _, p := range le.Problems {
				p.Message = fmt.Sprintf("document %q: %s", title(d.Title), p.Message)
				problems = append(problems, p)
			}
			continue
		} else if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, ref := range md.Images() {
			seen[ref.URL] = true
		}
		if len(seen) > limits.MaxImages {
			problems = append(problems, limits.Problem{
				Field: "images", Source: limits.SourceImage, Code: limits.CodeImage,
				Message: fmt.Sprintf("document %q references %d images, at most %d", title(d.Title), len(seen), limits.MaxImages),
			})
		}
	}
	return limits.Invalid(problems...)
}

// Markdown joins docs into one document. skipped, when not empty, is listed
// first, in a notice right after the table of contents.
func Markdown(docs []Doc, skipped []Skipped) []byte {
	var b bytes.Buffer
	if len(skipped) > 0 {
		b.WriteString(":::info\nNot printed:\n\n")
		for _, s := range skipped {
			fmt.Fprintf(&b, "- %s (%s)\n", escape(title(s.Title)), escape(s.Why))
		}
		b.WriteString("\n:::\n\n")
	}
	for i, d := range docs {
		if d.Depth == 0 || i == 0 {
			// Outline's page break: the contents have their page, and
			// each top-level document starts one.
			b.WriteString("***\n\n")
		}
		level := min(d.Depth+1, 3)
		fmt.Fprintf(&b, "%s %s\n\n", strings.Repeat("#", level), escape(title(d.Title)))
		b.WriteString(body(d.Text, i))
		b.WriteString("\n\n")
	}
	return b.Bytes()
}

func title(t string) string {
	if strings.TrimSpace(t) == "" {
		return "Untitled"
	}
	return t
}

// escape makes a title plain text in Markdown: every ASCII punctuation
// character gets a backslash, and a line break becomes a space.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case r < 0x80 && strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	atxHeading = regexp.MustCompile(`^( {0,3})(#{1,6})([ \t]|$)`)
	footnote   = regexp.MustCompile(`\[\^([^\]\s]+)\]`)
)

// body returns a document's text with its headings three levels deeper
// (at most 6), its footnote labels prefixed with the document's number,
// and a code fence, notice or toggle it leaves open closed: the next
// document must not end up inside it.
func body(text string, n int) string {
	var out strings.Builder
	var b blocks
	for _, line := range strings.Split(text, "\n") {
		if b.take(line) {
			line = deeper(line, n)
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	if b.fence != "" {
		out.WriteString(b.fence + "\n")
	}
	for i := len(b.open) - 1; i >= 0; i-- {
		out.WriteString("\n" + b.open[i] + "\n")
	}
	return out.String()
}

// blocks follows the blocks of a document that span lines: a code fence,
// notices and toggles.
type blocks struct {
	fence string // the open code fence, "" outside one
	// open lists the notices (":::") and toggles (their fence of "+")
	// opened and not yet closed, innermost last.
	open []string
}

// take reads one line; it reports whether the line is text (neither in a
// code block nor a block's fence), whose headings and footnotes move.
func (b *blocks) take(line string) (text bool) {
	trimmed := strings.TrimLeft(line, " ")
	bare := strings.TrimRight(trimmed, " \t\r")
	switch {
	case b.fence != "":
		if strings.HasPrefix(trimmed, b.fence) && strings.Trim(trimmed, b.fence[:1]+" \t\r") == "" {
			b.fence = ""
		}
	case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
		b.fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, trimmed[:1]))]
	case strings.HasPrefix(bare, ":::"):
		b.notice(bare)
	case strings.HasPrefix(bare, "+++"):
		b.toggle(bare)
	default:
		return true
	}
	return false
}

// notice opens a notice, or a closing ":::" closes the innermost one.
func (b *blocks) notice(bare string) {
	if strings.Trim(bare, ":") != "" {
		b.open = append(b.open, ":::")
		return
	}
	for i := len(b.open) - 1; i >= 0; i-- {
		if b.open[i] == ":::" {
			b.open = b.open[:i]
			return
		}
	}
}

// toggle opens a toggle, or a bare fence at least as long as the open
// toggle's closes it (Outline's rule).
func (b *blocks) toggle(bare string) {
	run := len(bare) - len(strings.TrimLeft(bare, "+"))
	if n := len(b.open); run == len(bare) && n > 0 && strings.HasPrefix(b.open[n-1], "+") && run >= len(b.open[n-1]) {
		b.open = b.open[:n-1]
		return
	}
	b.open = append(b.open, bare[:run])
}

// deeper moves a text line of document n: a heading three levels deeper
// (at most 6), footnote labels prefixed with the document's number.
func deeper(line string, n int) string {
	if m := atxHeading.FindStringSubmatch(line); m != nil {
		level := min(len(m[2])+3, 6)
		line = m[1] + strings.Repeat("#", level) + line[len(m[1])+len(m[2]):]
	}
	return footnote.ReplaceAllString(line, fmt.Sprintf("[^d%d-$1]", n+1))
}
