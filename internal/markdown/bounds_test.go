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

// TestLinkGuardAgreesWithGoldmark: the link guard (linkMayClose, the 8 KB
// window) finds exactly the links goldmark's own link parser finds, on
// random mixes of the characters that matter to inline links.
func TestLinkGuardAgreesWithGoldmark(t *testing.T) {
	plain := goldmark.New().Parser()
	ours := parserFor(DialectOutline)
	rng := rand.New(rand.NewPCG(10, 1))
	pieces := []string{"[", "]", "(", ")", "<", ">", "\"", "'", " ", "\n", "a", "\\", "![", "](", "](<", "> ", "\t", "b c", "\n\n"}
	n := 20000
	if testing.Short() {
		n = 3000
	}
	for i := 0; i < n; i++ {
		var b strings.Builder
		for range 1 + rng.IntN(14) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		src := []byte(b.String())
		want := linksOf(plain.Parse(text.NewReader(src)), src)
		got := linksOf(ours.Parse(text.NewReader(src)), src)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("links of %q = %v, goldmark finds %v", src, got, want)
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
