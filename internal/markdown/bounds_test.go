package markdown

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"

	"github.com/outprint/outprint/internal/limits"
)

// TestNestingRefused: containers nested beyond MaxBlockDepth are refused
// with a document error naming the line of the first one too deep, and
// the parse of the 64 KB documents of the finding (unclosed notices,
// toggles, quotes, lists) allocates little: it used to take gigabytes.
func TestNestingRefused(t *testing.T) {
	lists := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat("  ", i) + "- a\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name string
		src  string
		line int
	}{
		{"notices", strings.Repeat(":::info\n", 8000), MaxBlockDepth + 1},
		{"toggles", strings.Repeat("+++ a\n", 10000), MaxBlockDepth + 1},
		{"quotes", strings.Repeat(">", 64000), 1},
		{"quote lines", strings.Repeat("> ", MaxBlockDepth+1) + "a\n", 1},
		{"lists", lists(200), MaxBlockDepth + 1},
		{"footnote definitions", strings.Repeat("[^a]: ", 4000) + "x\n", 1},
		{"notice in quotes", strings.Repeat("> ", MaxBlockDepth) + "\n" + strings.Repeat("> ", MaxBlockDepth) + ":::info\n", 2},
		{"after text", "text\n\n" + strings.Repeat(":::tip\n", MaxBlockDepth+5) + "x\n", 2 + MaxBlockDepth + 1},
	} {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		_, err := Parse([]byte(tc.src), Options{LineOffset: 0, Dialect: DialectOutline}) // toggles are Outline's
		runtime.ReadMemStats(&m1)
		var le *limits.Error
		if !errors.As(err, &le) || le.Kind != limits.KindDocument || len(le.Problems) != 1 {
			t.Errorf("Parse(%s) = %v, want one 422 problem", tc.name, err)
			continue
		}
		p := le.Problems[0]
		if p.Source != limits.SourceDocument || p.Code != limits.CodeInvalid || p.Line != tc.line || !strings.Contains(p.Message, "nested too deeply") {
			t.Errorf("Parse(%s) = %+v, want document/invalid at line %d saying nested too deeply", tc.name, p, tc.line)
		}
		if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 16<<20 {
			t.Errorf("Parse(%s) allocated %d MB, want under 16", tc.name, alloc>>20)
		}
	}
}

// TestNestingAllowed: MaxBlockDepth levels parse, whichever containers
// make them, and the lines inside them cost memory in proportion to the
// lines, not to lines × depth (goldmark kept a record per open block and
// line: third_party/goldmark/OUTPRINT.md).
func TestNestingAllowed(t *testing.T) {
	var b strings.Builder
	for i := range MaxBlockDepth / 2 {
		b.WriteString(strings.Repeat("  ", i) + "- a\n")
	}
	for _, src := range []string{
		strings.Repeat(":::info\n", MaxBlockDepth) + "x\n",
		strings.Repeat("> ", MaxBlockDepth) + "x\n",
		b.String() + strings.Repeat("  ", MaxBlockDepth/2) + strings.Repeat("> ", MaxBlockDepth/2) + "x\n",
	} {
		if _, err := Parse([]byte(src), Options{}); err != nil {
			t.Errorf("Parse(%.40q…) = %v, want no error", src, err)
		}
	}
	lines := strings.Repeat("a\n", 100_000)
	alloc := func(src string) uint64 {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		if _, err := Parse([]byte(src), Options{}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	flat, deep := alloc(":::info\n"+lines), alloc(strings.Repeat(":::info\n", MaxBlockDepth)+lines)
	if deep > flat+flat/2 {
		t.Errorf("Parse of 100,000 lines in %d notices allocated %d MB, in one %d MB: want about the same",
			MaxBlockDepth, deep>>20, flat>>20)
	}
}

// TestMathErrorsCapped: a megabyte of one disallowed formula repeated is
// answered with MaxProblems entries and a summary, not 200,000 entries.
func TestMathErrorsCapped(t *testing.T) {
	src := strings.Repeat(`$\q$ `, (1<<20)/5)
	_, err := Parse([]byte(src), Options{})
	var le *limits.Error
	if !errors.As(err, &le) {
		t.Fatalf("Parse = %v, want a *limits.Error", err)
	}
	if len(le.Problems) != limits.MaxProblems+1 {
		t.Fatalf("Parse: %d problems, want %d", len(le.Problems), limits.MaxProblems+1)
	}
	last := le.Problems[limits.MaxProblems]
	if want := "and 209615 more problems"; last.Message != want || last.Code != limits.CodeMath {
		t.Errorf("Parse: last problem %+v, want code math and %q", last, want)
	}
}

// TestInlineNestingRefused: emphasis nested hundreds of levels deep is
// refused as a document problem that says so (it used to reach TeX, which
// ran out of groups and was reported as a lack of memory or processes);
// MaxInlineDepth levels are fine.
func TestInlineNestingRefused(t *testing.T) {
	for _, tc := range []struct {
		src  string
		line int
	}{
		{"text\n\n" + strings.Repeat("*a ", 200) + strings.Repeat("a* ", 200), 3},
		{strings.Repeat("*", 2000) + "a" + strings.Repeat("*", 2000), 1},
		{strings.Repeat("*a **a ", 40) + "b" + strings.Repeat(" a** a*", 40), 1},
	} {
		_, err := Parse([]byte(tc.src), Options{})
		var le *limits.Error
		if !errors.As(err, &le) || len(le.Problems) != 1 {
			t.Errorf("Parse(%.30q…) = %v, want one problem", tc.src, err)
			continue
		}
		p := le.Problems[0]
		if p.Code != limits.CodeInvalid || p.Source != limits.SourceDocument || p.Line != tc.line || !strings.Contains(p.Message, "nested too deeply") {
			t.Errorf("Parse(%.30q…) = %+v, want document/invalid at line %d saying nested too deeply", tc.src, p, tc.line)
		}
	}
	ok := strings.Repeat("*a ", MaxInlineDepth) + strings.Repeat("a* ", MaxInlineDepth)
	if _, err := Parse([]byte(ok), Options{}); err != nil {
		t.Errorf("Parse(%d levels of emphasis) = %v, want no error", MaxInlineDepth, err)
	}
}

// linksOf lists the inline links and images of a tree with their targets.
func linksOf(root ast.Node, src []byte) []string {
	var out []string
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			out = append(out, fmt.Sprintf("link %q %q", n.Destination, n.Title))
		case *ast.Image:
			out = append(out, fmt.Sprintf("image %q %q", n.Destination, n.Title))
		}
		return ast.WalkContinue, nil
	})
	return out
}

// inlineShape writes the inline structure of a tree: links and images
// with their targets, emphasis with its level, code spans, raw HTML and
// text, nested in brackets.
func inlineShape(root ast.Node, src []byte) string {
	var b strings.Builder
	// Adjacent text is written as one, its white space as one space:
	// parsers split text differently and keep different trailing blanks.
	var text []byte
	flush := func() {
		if len(text) > 0 {
			fmt.Fprintf(&b, "%q", strings.Join(strings.Fields(string(text)), " "))
			text = text[:0]
		}
	}
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if n.Type() != ast.TypeInline {
			return ast.WalkContinue, nil
		}
		if t, ok := n.(*ast.Text); ok {
			if entering {
				text = append(text, t.Segment.Value(src)...)
				if t.SoftLineBreak() || t.HardLineBreak() {
					text = append(text, ' ')
				}
			}
			return ast.WalkContinue, nil
		}
		flush()
		if !entering {
			b.WriteString(")")
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			fmt.Fprintf(&b, "link %q %q(", n.Destination, n.Title)
		case *ast.Image:
			fmt.Fprintf(&b, "image %q %q(", n.Destination, n.Title)
		case *ast.Emphasis:
			fmt.Fprintf(&b, "em%d(", n.Level)
		case *ast.CodeSpan:
			b.WriteString("code(")
		default:
			fmt.Fprintf(&b, "%s(", n.Kind())
		}
		return ast.WalkContinue, nil
	})
	flush()
	return b.String()
}

// TestLinkGuardAgreesWithGoldmark: the link guard (linkMayClose, the 8 KB
// window, the label depth) and the delimiter plan find exactly the links,
// emphasis and code spans goldmark's own parsers find, on random mixes of
// the characters that matter to inline links: link destinations in angle
// brackets opened, unclosed, closed and escaped, nested in brackets, mixed
// with emphasis, code spans and raw HTML (issue 29). The links are
// compared in both dialects, the whole inline structure in CommonMark's
// (Outline's reads `__` as underline).
func TestLinkGuardAgreesWithGoldmark(t *testing.T) {
	plain := goldmark.New().Parser()
	dialects := []parser.Parser{parserFor(DialectCommonMark), parserFor(DialectOutline)}
	rng := rand.New(rand.NewPCG(10, 1))
	pieces := []string{"[", "]", "(", ")", "<", ">", "\"", "'", " ", "\n", "a", "\\", "![", "](", "](<", "> ", "\t", "b c", "\n\n",
		"*", "**", "_", "`", "``", "[[", "]]", "<b>", "</b>", "\\<", "\\>", "<b", "[a](<b", "[a](<b>", "[a](<b>)", "(<", "<>"}
	n := 30000
	if testing.Short() {
		n = 4000
	}
	for i := 0; i < n; i++ {
		var b strings.Builder
		for range 1 + rng.IntN(16) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		src := []byte(b.String())
		tree := plain.Parse(text.NewReader(src))
		want := linksOf(tree, src)
		for d, p := range dialects {
			ours := p.Parse(text.NewReader(src))
			if got := linksOf(ours, src); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("links of %q (dialect %d) = %v, goldmark finds %v", src, d, got, want)
			}
			if d == 0 {
				if got, want := inlineShape(ours, src), inlineShape(tree, src); got != want {
					t.Fatalf("inlines of %q = %s, goldmark finds %s", src, got, want)
				}
			}
		}
	}
}

// TestWarningsCapped: a document with hundreds of links that cannot be
// followed gets MaxProblems warnings and a summary.
func TestWarningsCapped(t *testing.T) {
	d, err := Parse([]byte(strings.Repeat("[x](javascript:alert(1)) ", 300)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.LaTeX(Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Warnings) != limits.MaxProblems+1 {
		t.Fatalf("LaTeX: %d warnings, want %d", len(out.Warnings), limits.MaxProblems+1)
	}
	if last := out.Warnings[limits.MaxProblems].Message; last != "and 200 more problems" {
		t.Errorf("LaTeX: last warning %q, want %q", last, "and 200 more problems")
	}
}

// breakless measures what XeTeX's work on a body grows with: the longest
// run of printed characters without a break opportunity (a space, a line
// end that is no comment, \opbr) and the longest paragraph (ended by \par,
// \opbrk, an \item or an environment). XeTeX sets a run without a break
// as one box, and its time to set a paragraph grows with the square of
// the paragraph, so both must stay bounded whatever the input: a run
// whose period divided the writer's break interval (`[a](<b` repeated)
// got no break at all, and 24 KB of it took XeTeX a minute (issue 29).
// A control word with an empty argument (\textless{}) or a control
// symbol (\%) prints one character; other control words and braces print
// none. Verbatim blocks are lines of their own and are skipped.
func breakless(body string) (word, para int) {
	unprinted := map[string]bool{"href": true, "special": true, "opanchor": true, "hyperlink": true,
		"setcounter": true, "oplanguage": true, "opimg": true, "label": true}
	w, p := 0, 0
	brk := func() { word = max(word, w); w = 0 }
	par := func() { brk(); para = max(para, p); p = 0 }
	char := func() { w++; p++ }
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '\\' && i+1 < len(body) && !isLetter(body[i+1]):
			i++
			if body[i] == '\\' {
				par() // the end of a table row
			} else if body[i] == '\n' || body[i] == ' ' {
				brk()
			} else {
				char()
			}
		case c == '\\':
			j := i + 1
			for j < len(body) && isLetter(body[j]) {
				j++
			}
			name := body[i+1 : j]
			switch {
			case name == "begin" && strings.HasPrefix(body[j:], "{Verbatim}"):
				end := strings.Index(body[j:], `\end{Verbatim}`)
				if end < 0 {
					end = len(body) - j
				}
				j += end
				par()
			case name == "opbr":
				brk()
			case name == "par" || name == "opbrk" || name == "item" || name == "begin" || name == "end" ||
				strings.HasSuffix(name, "section") || strings.HasSuffix(name, "paragraph"):
				par()
			case unprinted[name] && strings.HasPrefix(body[j:], "{"):
				// The argument is a URL, a name or a PDF special.
				if k := strings.IndexByte(body[j:], '}'); k >= 0 {
					j += k + 1
				}
			case strings.HasPrefix(body[j:], "{}"):
				char()
				j += 2
			}
			i = j - 1
		case c == '%':
			for i < len(body) && body[i] != '\n' {
				i++
			}
		case c == ' ' || c == '\n' || c == '\t':
			brk()
		case c == '{' || c == '}':
		case c >= 0x80 && c < 0xc0: // a UTF-8 continuation byte
		default:
			char()
		}
	}
	par()
	return word, para
}

// TestWordBreaksWhateverThePeriod: a run without spaces gets a break
// opportunity at least every few characters and a paragraph end at least
// every maxPara bytes or so, whatever its period and its closing marks
// (breakless). A break due before a closing mark used to be dropped, not
// delayed: a run whose period divides the break interval had none.
func TestWordBreaksWhateverThePeriod(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	alphabet := "a]),.;:!?}'\"(<[b"
	patterns := []string{"[a](<b", "[a](<b>", "a]", "ab]", "abcde,", "[a](b", "a)", "a.a,a;"}
	for range 300 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		patterns = append(patterns, b.String())
	}
	for _, p := range patterns {
		src := strings.Repeat(p, (24<<10)/len(p))
		d, err := Parse([]byte(src), Options{})
		if err != nil {
			t.Fatalf("Parse(%q × %d) = %v", p, len(src)/len(p), err)
		}
		out, err := d.LaTeX(Meta{}, nil)
		if err != nil {
			t.Fatalf("LaTeX(%q × %d) = %v", p, len(src)/len(p), err)
		}
		if word, para := breakless(out.Body); word > 40 || para > maxPara+1000 {
			t.Errorf("LaTeX(%q × %d): %d characters without a break, a paragraph of %d; want at most 40 and %d",
				p, len(src)/len(p), word, para, maxPara+1000)
		}
	}
}

// TestHTMLPairsAsScanned: the allowed inline HTML tags pair (and print as
// formatting) exactly as the scan for each opener's closer among its
// siblings did, on random mixes of opening, closing and self-closing
// tags, while the pairing is linear.
func TestHTMLPairsAsScanned(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 2))
	pieces := []string{"<b>", "</b>", "<i>", "</i>", "<b/>", "<B>", "</B >", "x", " ", "*", "<br>", "<u>", "</u>"}
	for range 2000 {
		var b strings.Builder
		for range 1 + rng.IntN(16) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		src := []byte(b.String())
		d, err := Parse(src, Options{})
		if err != nil {
			t.Fatalf("Parse(%q) = %v", src, err)
		}
		want := map[ast.Node]ast.Node{}
		var got writerBounds
		_ = ast.Walk(d.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			m := htmlTagRE.FindStringSubmatch(strings.TrimSpace(rawOf(n, src)))
			if h, ok := n.(*ast.RawHTML); ok && entering && m != nil && m[1] == "" && m[3] == "" {
				// An opening tag the writer asks for.
				if s := scanCloser(h, src); s != nil {
					want[n] = s
				}
				if s := got.htmlCloser(n, src); s != nil && want[n] != s {
					t.Fatalf("in %q, the closer of %q = %q, the scan finds %v", src, rawOf(h, src), rawOf(s, src), want[n])
				}
				if want[n] != nil && got.htmlCloser(n, src) == nil {
					t.Fatalf("in %q, %q has no closer, the scan finds one", src, rawOf(h, src))
				}
			}
			return ast.WalkContinue, nil
		})
	}
}

func rawOf(n ast.Node, src []byte) string {
	h, ok := n.(*ast.RawHTML)
	if !ok {
		return ""
	}
	var b strings.Builder
	for i := 0; i < h.Segments.Len(); i++ {
		seg := h.Segments.At(i)
		b.Write(seg.Value(src))
	}
	return b.String()
}

// scanCloser is the scan the writer used to do for an allowed opening tag
// n: its closing tag among the following siblings, at the same depth.
func scanCloser(n *ast.RawHTML, src []byte) ast.Node {
	name := strings.ToLower(htmlTagRE.FindStringSubmatch(strings.TrimSpace(rawOf(n, src)))[2])
	depth := 0
	for s := n.NextSibling(); s != nil; s = s.NextSibling() {
		h, ok := s.(*ast.RawHTML)
		if !ok {
			continue
		}
		t := htmlTagRE.FindStringSubmatch(strings.TrimSpace(rawOf(h, src)))
		if t == nil || strings.ToLower(t[2]) != name {
			continue
		}
		if t[1] == "" {
			depth++
			continue
		}
		if depth > 0 {
			depth--
			continue
		}
		return s
	}
	return nil
}
