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

// pathological are the inputs that make Markdown parsers quadratic:
// cmark's pathological tests (test/pathological_tests.py in cmark and
// cmark-gfm), made linear in n where cmark's grow faster (backticks,
// lists), and the ones found against outprint (issue 10). Each makes an
// input of about n repetitions of its pattern.
var pathological = []struct {
	name string
	gen  func(n int) string
}{
	{"emoji, distinct and repeated", func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteRune(0x1f600 + rune(i%400))
			b.WriteString("👍🏽 :smile: ")
		}
		return b.String()
	}},
	{"emoji joined without end", func(n int) string { return strings.Repeat("😀\u200d", n) }},
	{"nested strong emph", func(n int) string { return strings.Repeat("*a **a ", n/2) + "b" + strings.Repeat(" a** a*", n/2) }},
	{"emph closers without openers", func(n int) string { return strings.Repeat("a_ ", n) }},
	{"emph openers without closers", func(n int) string { return strings.Repeat("_a ", n) }},
	{"asterisk openers without closers", func(n int) string { return strings.Repeat("*a ", n) }},
	{"escalating asterisk runs", func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat("*", i%40+1) + "a ")
		}
		return b.String()
	}},
	{"link closers without openers", func(n int) string { return strings.Repeat("a]", n) }},
	{"link openers without closers", func(n int) string { return strings.Repeat("[a", n) }},
	{"mismatched openers and closers", func(n int) string { return strings.Repeat("*a_ ", n) }},
	{"openers and closers multiple of 3", func(n int) string { return "a**b" + strings.Repeat("c* ", n) }},
	{"link openers and emph closers", func(n int) string { return strings.Repeat("[ a_", n) }},
	{"pattern [ (]( repeated", func(n int) string { return strings.Repeat("[ (](", n) }},
	{"pattern ![[]() repeated", func(n int) string { return strings.Repeat("![[]()", n) }},
	{"nested brackets", func(n int) string { return strings.Repeat("[", n/2) + "a" + strings.Repeat("]", n/2) }},
	{"nested block quotes", func(n int) string { return strings.Repeat("> ", n) + "a" }},
	{"block quote markers", func(n int) string { return strings.Repeat(">", n) }},
	{"deeply nested lists", func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(strings.Repeat("  ", i%30) + "* a\n")
		}
		return b.String()
	}},
	{"backticks", func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString("e" + strings.Repeat("`", i%200+1))
		}
		return b.String()
	}},
	{"unclosed links A", func(n int) string { return strings.Repeat("[a](<b", n) }},
	{"unclosed links B", func(n int) string { return strings.Repeat("[a](b", n) }},
	{"unclosed link destinations", func(n int) string { return strings.Repeat("[a](", n) }},
	{"unclosed image destinations", func(n int) string { return strings.Repeat("![a](", n) }},
	{"unclosed <!--", func(n int) string { return "</" + strings.Repeat("<!--", n) }},
	{"tables", func(n int) string { return strings.Repeat("aaa\rbbb\n-\v\n", n) }},
	{"one-row tables", func(n int) string { return strings.Repeat("| a |\n|---|\n| b |\n\n", n) }},
	{"many references", func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "[%d]: u\n", i)
		}
		return b.String() + strings.Repeat("[0] ", n/4)
	}},
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
	{"nested emphasis", func(n int) string { return strings.Repeat("*", n/2) + "a" + strings.Repeat("*", n/2) }},
	{"underline runs", func(n int) string { return strings.Repeat("__a ", n) }},
	{"highlight runs", func(n int) string { return strings.Repeat("==a ", n) }},
	{"unclosed code spans", func(n int) string { return strings.Repeat("`a ", n) }},
	{"autolinks", func(n int) string { return strings.Repeat("www.a", n) }},
	{"footnote references", func(n int) string { return strings.Repeat("[^a", n) }},
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
			if tr > maxGrowth {
				// One more try: a neighbour's burst can land on one side.
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
