//go:build !race

package markdown

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pathologicalSize is the smaller input size of TestPathological in bytes;
// `make fuzz-pathological` raises it (the short run of `make test` keeps
// the default).
var pathologicalSize = flag.Int("pathological-size", 48<<10, "TestPathological: bytes of the smaller input of each family")

// pathological are the inputs that make Markdown parsers slow: every
// family of cmark's pathological tests (test/pathological_tests.py in
// cmark 0.31 and cmark-gfm, under cmark's names; made linear in n where
// cmark's grow faster, as backticks and deeply nested lists do, and
// repeated where cmark's is one fixed string), the forms of issue 29
// (link destinations in angle brackets), and the ones found against
// outprint (issue 10). Each makes an input of about n repetitions of its
// pattern.
var pathological = []struct {
	name string
	gen  func(n int) string
}{
	// cmark's test/pathological_tests.py, in its order.
	{"nested strong emph", func(n int) string { return strings.Repeat("*a **a ", n/2) + "b" + strings.Repeat(" a** a*", n/2) }},
	{"many emph closers with no openers", func(n int) string { return strings.Repeat("a_ ", n) }},
	{"many emph openers with no closers", func(n int) string { return strings.Repeat("_a ", n) }},
	{"many link closers with no openers", func(n int) string { return strings.Repeat("a]", n) }},
	{"many link openers with no closers", func(n int) string { return strings.Repeat("[a", n) }},
	{"mismatched openers and closers", func(n int) string { return strings.Repeat("*a_ ", n) }},
	{"issue #389", func(n int) string { return strings.Repeat("*a ", n/2) + strings.Repeat("_a*_ ", n/2) }},
	{"openers and closers multiple of 3", func(n int) string { return "a**b" + strings.Repeat("c* ", n) }},
	{"link openers and emph closers", func(n int) string { return strings.Repeat("[ a_", n) }},
	{"pattern [ (]( repeated", func(n int) string { return strings.Repeat("[ (](", n) }},
	{"pattern ![[]() repeated", func(n int) string { return strings.Repeat("![[]()", n) }},
	{"hard link/emph case", func(n int) string { return strings.Repeat("**x [a*b**c*](d) ", n) }},
	{"nested brackets", func(n int) string { return strings.Repeat("[", n/2) + "a" + strings.Repeat("]", n/2) }},
	{"nested block quotes", func(n int) string { return strings.Repeat("> ", n) + "a" }},
	{"deeply nested lists", func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat("  ", i%30) + "* a\n")
		}
		return b.String()
	}},
	{"U+0000 in input", func(n int) string { return strings.Repeat("abc\x00de\x00", n) }},
	{"backticks", func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString("e" + strings.Repeat("`", i%200+1))
		}
		return b.String()
	}},
	{"unclosed links A", func(n int) string { return strings.Repeat("[a](<b", n) }},
	{"unclosed links B", func(n int) string { return strings.Repeat("[a](b", n) }},
	{"unclosed <!--", func(n int) string { return "</" + strings.Repeat("<!--", n) }},
	{"empty lines in deeply nested lists", func(n int) string { return strings.Repeat("- ", n) + "x" + strings.Repeat("\n", n) }},
	{"empty lines in deeply nested lists in blockquote", func(n int) string {
		return "> " + strings.Repeat("- ", n) + "x\n" + strings.Repeat(">\n", n)
	}},
	{"emph in deep blockquote", func(n int) string { return strings.Repeat(">", n) + strings.Repeat("a*", n) }},
	{"reference collisions", referenceCollisions},
	{"many references", func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "[%d]: u\n", i)
		}
		return b.String() + strings.Repeat("[0] ", n/4)
	}},
	{"nested inlines", func(n int) string { return strings.Repeat("*", n/2) + "a" + strings.Repeat("*", n/2) }},
	// cmark-gfm's addition.
	{"tables", func(n int) string { return strings.Repeat("aaa\rbbb\n-\v\n", n) }},

	// Link destinations in angle brackets (issue 29): closed, nested in
	// brackets, mixed with emphasis, code spans and escapes.
	{"closed angle destinations", func(n int) string { return strings.Repeat("[a](<b>", n) }},
	{"closed angle links", func(n int) string { return strings.Repeat("[a](<b>) ", n) }},
	{"angle destinations in brackets", func(n int) string { return strings.Repeat("[[a](<b", n) }},
	{"angle destinations with emphasis and code", func(n int) string { return strings.Repeat("*[a](<`b_", n) }},
	{"escaped angle destinations", func(n int) string { return strings.Repeat("[a](<b\\>", n) }},
	{"angle destinations across lines", func(n int) string { return strings.Repeat("[a](<b\n", n) }},
	{"angle destinations nested", func(n int) string { return strings.Repeat("[a](<", n/2) + "b" + strings.Repeat(">)", n/2) }},

	// Found against outprint (issue 10 and after).
	{"emoji, distinct and repeated", func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteRune(0x1f600 + rune(i%400))
			b.WriteString("👍🏽 :smile: ")
		}
		return b.String()
	}},
	{"emoji joined without end", func(n int) string { return strings.Repeat("😀\u200d", n) }},
	{"asterisk openers without closers", func(n int) string { return strings.Repeat("*a ", n) }},
	{"escalating asterisk runs", func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat("*", i%40+1) + "a ")
		}
		return b.String()
	}},
	{"block quote markers", func(n int) string { return strings.Repeat(">", n) }},
	{"unclosed link destinations", func(n int) string { return strings.Repeat("[a](", n) }},
	{"unclosed image destinations", func(n int) string { return strings.Repeat("![a](", n) }},
	{"one-row tables", func(n int) string { return strings.Repeat("| a |\n|---|\n| b |\n\n", n) }},
	{"unclosed notices", func(n int) string { return strings.Repeat(":::info\n", n) }},
	{"unclosed toggles", func(n int) string { return strings.Repeat("+++ a\n", n) }},
	{"notices in list items", func(n int) string { return strings.Repeat("1. :::info\n   a\n   :::\n", n) }},
	{"identical headings", func(n int) string { return strings.Repeat("# a\n", n) }},
	{"empty headings", func(n int) string { return strings.Repeat("##\n", n) }},
	{"code languages", func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "```x%d\ny\n```\n", i)
		}
		return b.String()
	}},
	{"dollars", func(n int) string { return strings.Repeat("$a ", n) }},
	{"disallowed formulas", func(n int) string { return strings.Repeat(`$\q$ `, n) }},
	{"underline runs", func(n int) string { return strings.Repeat("__a ", n) }},
	{"highlight runs", func(n int) string { return strings.Repeat("==a ", n) }},
	{"unclosed code spans", func(n int) string { return strings.Repeat("`a ", n) }},
	{"autolinks", func(n int) string { return strings.Repeat("www.a", n) }},
	{"footnote references", func(n int) string { return strings.Repeat("[^a", n) }},
}

// cmarkFamilies are the names of cmark's pathological families (cmark
// 0.31's test/pathological_tests.py, its pathological and
// pathological_cmark tables, and cmark-gfm's tables); TestPathological
// checks each is in pathological.
var cmarkFamilies = []string{
	"nested strong emph", "many emph closers with no openers", "many emph openers with no closers",
	"many link closers with no openers", "many link openers with no closers", "mismatched openers and closers",
	"issue #389", "openers and closers multiple of 3", "link openers and emph closers", "pattern [ (]( repeated",
	"pattern ![[]() repeated", "hard link/emph case", "nested brackets", "nested block quotes", "deeply nested lists",
	"U+0000 in input", "backticks", "unclosed links A", "unclosed links B", "unclosed <!--",
	"empty lines in deeply nested lists", "empty lines in deeply nested lists in blockquote", "emph in deep blockquote",
	"reference collisions", "many references", "nested inlines", "tables",
}

// referenceCollisions is cmark's "reference collisions": n link reference
// definitions whose labels collide in cmark's 16-bucket hash of labels,
// each followed by a reference to the first label.
func referenceCollisions(n int) string {
	badHash := func(ref string) bool {
		var h uint32
		for _, c := range ref {
			h = uint32(c) + h<<6 + h<<16 - h
		}
		return h%16 == 0
	}
	var keys []string
	for i := 0; len(keys) < n/8+1; i++ {
		if k := fmt.Sprintf("x%d", i); badHash(k) {
			keys = append(keys, k)
		}
	}
	var b strings.Builder
	for _, k := range keys[1:] {
		fmt.Fprintf(&b, "[%s]: /url\n\n[%s]\n\n", k, keys[0])
	}
	return b.String()
}

// convert is the work a document costs before TeX: Parse and LaTeX, in
// both dialects (toggles, underline and Outline's `$` rule exist only in
// Outline's).
func convert(src string) {
	for _, dialect := range []Dialect{DialectCommonMark, DialectOutline} {
		d, err := Parse([]byte(src), Options{Dialect: dialect})
		if err == nil {
			// Every emoji the document lists has an image, as when the
			// render has the emoji set.
			var imgs map[string]Image
			for i, name := range d.Emoji() {
				if imgs == nil {
					imgs = map[string]Image{}
				}
				imgs[EmojiKey(name)] = Image{File: fmt.Sprintf("emoji-img-%02d.pdf", i+1), Width: 27, Height: 27}
			}
			_, _ = d.LaTeX(Meta{}, imgs)
		}
	}
}

// cpuTime is the CPU time the process has used: unlike the wall clock, it
// does not count the time other programs on a busy machine take.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cost returns the least CPU time a conversion of src takes, over a few
// rounds, and the bytes one allocates. A round repeats the conversion
// until it has used at least 40 ms, since the kernel accounts CPU time in
// ticks of a few milliseconds. The collector is off while it times (a
// collection runs before each round): how often it runs depends on the
// heap's size, which made a linear family look ×3 at 48 KB and ×2 at
// 256 KB; the bytes allocated are measured separately.
func cost(src string, rounds int) (time.Duration, uint64) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	best := time.Duration(1 << 62)
	var alloc uint64
	for range rounds {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		convert(src)
		runtime.ReadMemStats(&m1)
		alloc = m1.TotalAlloc - m0.TotalAlloc
		start := cpuTime()
		n := 0
		for n == 0 || cpuTime()-start < 40*time.Millisecond {
			convert(src)
			n++
		}
		best = min(best, (cpuTime()-start)/time.Duration(n))
	}
	return best, alloc
}

// TestPathological feeds every pathological family at two sizes, n and
// 2n, and checks that doubling the input at most about doubles the work:
// the CPU time (least of a few runs, so a busy machine does not decide) and
// the bytes allocated grow at most maxGrowth times. A quadratic family
// grows four times; the slack covers cache and allocator effects. It is a
// ratio of two runs in the same process, not a timed assertion. The file
// is left out of race-detector builds (the detector changes what costs
// what); `make test` runs this test once more without it.
func TestPathological(t *testing.T) {
	const maxGrowth = 3.0
	size := *pathologicalSize
	names := map[string]bool{}
	for _, f := range pathological {
		names[f.name] = true
	}
	for _, name := range cmarkFamilies {
		if !names[name] {
			t.Errorf("cmark's family %q is not in pathological", name)
		}
	}
	for _, f := range pathological {
		t.Run(f.name, func(t *testing.T) {
			unit := max(1, len(f.gen(1000))/1000)
			n := max(1, size/unit)
			small, large := f.gen(n), f.gen(2*n)
			convert(small) // warm caches (lexers, allocator) before timing
			t1, a1 := cost(small, 3)
			t2, a2 := cost(large, 3)
			// Some generators do not double exactly (backticks grow a
			// little faster than n): growth is per doubling of the bytes.
			per := 2 / (float64(len(large)) / float64(len(small)))
			tr := per * float64(t2) / float64(max(t1, time.Microsecond))
			ar := per * float64(a2) / float64(max(a1, 1<<16))
			t.Logf("%d → %d bytes: %v → %v (×%.2f), %d → %d KB allocated (×%.2f)",
				len(small), len(large), t1, t2, tr, a1>>10, a2>>10, ar)
			// Two more tries, each of more rounds: a neighbour's burst can
			// land on one side, and on this virtual machine the memory a
			// large input touches first costs more some times than others
			// (CI once measured a linear family ×3.67, then ×3.00). A
			// quadratic family grows about four times on every try.
			for try := 0; try < 2 && tr > maxGrowth; try++ {
				t1, _ = cost(small, 5)
				t2, _ = cost(large, 5)
				tr = per * float64(t2) / float64(max(t1, time.Microsecond))
			}
			if tr > maxGrowth {
				t.Errorf("%s: doubling the input (%d → %d bytes) took %v → %v, ×%.2f, want at most ×%.1f",
					f.name, len(small), len(large), t1, t2, tr, maxGrowth)
			}
			if ar > maxGrowth {
				t.Errorf("%s: doubling the input (%d → %d bytes) allocated %d → %d KB, ×%.2f, want at most ×%.1f",
					f.name, len(small), len(large), a1>>10, a2>>10, ar, maxGrowth)
			}
		})
	}
}

// linkAlphabet is what FuzzLinkSyntaxLinear builds its documents from: the
// characters of inline link syntax (issue 29) and a few letters and
// spaces for them to enclose.
const linkAlphabet = "[]()<>\\`*\n ab!_\""

// linkSyntax maps fuzzed bytes onto linkAlphabet, at most n of them.
func linkSyntax(in []byte, n int) string {
	var b strings.Builder
	for i, c := range in {
		if i == n {
			break
		}
		b.WriteByte(linkAlphabet[int(c)%len(linkAlphabet)])
	}
	return b.String()
}

// linkDocument is open repeated k times, then middle, then close repeated
// k times: repeated patterns (close empty) and nested ones (a run of
// openers and one of closers), the two shapes of cmark's families.
func linkDocument(open, middle, close string, k int) string {
	return strings.Repeat(open, k) + middle + strings.Repeat(close, k)
}

// maxLinkGrowth is how much more CPU FuzzLinkSyntaxLinear lets a 16 KB
// document take than a 4 KB one of the same pattern: linear work grows ×4,
// quadratic ×16; the slack covers cache effects and a neighbour's burst.
const maxLinkGrowth = 8.0

// FuzzLinkSyntaxLinear: a document of link syntax four times as long
// costs at most maxLinkGrowth times the CPU (Parse and LaTeX in both
// dialects, as TestPathological measures). The fuzzer picks the pattern;
// the sizes are fixed at about 4 and 16 KB. Like TestPathological it
// compares two runs in one process rather than timing one.
//
//	go test ./internal/markdown -run '^$' -fuzz FuzzLinkSyntaxLinear -fuzztime 5m
func FuzzLinkSyntaxLinear(f *testing.F) {
	// Seeds in the alphabet's own indices would be unreadable: they are
	// written as text and mapped back.
	index := func(s string) []byte {
		out := make([]byte, len(s))
		for i := range len(s) {
			out[i] = byte(strings.IndexByte(linkAlphabet, s[i]))
		}
		return out
	}
	for _, seed := range [][3]string{
		{"[a](<b", "", ""}, {"[a](<b>", "", ""}, {"[a](b", "", ""}, {"[a](<", "b", ">)"},
		{"[", "a", "]"}, {"[[a](<b", "", ""}, {"*[a](<`b_", "", ""}, {"[a](<b\\>", "", ""},
		{"[a](<b\n", "", ""}, {"![[]()", "", ""}, {"[ (](", "", ""}, {"**x [a*b**c*](d) ", "", ""},
		{"*", "a", "*"}, {"``\\", "", ""}, {"<", "", ">"}, {"[a]: <b\n", "", ""},
	} {
		f.Add(index(seed[0]), index(seed[1]), index(seed[2]))
	}
	f.Fuzz(func(t *testing.T, open, middle, close []byte) {
		o, m, c := linkSyntax(open, 32), linkSyntax(middle, 64), linkSyntax(close, 32)
		unit := len(o) + len(c)
		if unit == 0 {
			return
		}
		k := max(1, (4<<10-len(m))/unit)
		small, large := linkDocument(o, m, c, k), linkDocument(o, m, c, 4*k)
		convert(small) // warm caches before timing
		growth := func(rounds int) (time.Duration, time.Duration, float64) {
			t1, _ := cost(small, rounds)
			t2, _ := cost(large, rounds)
			per := 4 / (float64(len(large)) / float64(len(small)))
			return t1, t2, per * float64(t2) / float64(max(t1, time.Microsecond))
		}
		t1, t2, g := growth(1)
		if g > maxLinkGrowth {
			// Measure again with more rounds before failing: one round can
			// meet a neighbour's burst.
			t1, t2, g = growth(5)
		}
		if g > maxLinkGrowth {
			t.Errorf("%q × %d + %q + %q × %d: %d → %d bytes took %v → %v, ×%.1f, want at most ×%.0f",
				o, k, m, c, k, len(small), len(large), t1, t2, g, maxLinkGrowth)
		}
	})
}
