//go:build !race

package forms

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

// pathologicalSize is the smaller values JSON of TestPathologicalValues in
// bytes; `make fuzz-pathological` raises it.
var pathologicalSize = flag.Int("pathological-size", 256<<10, "TestPathologicalValues: bytes of the smaller input of each family")

// pathologicalValues are values JSONs that made the parse or the check
// grow faster than their size: keys on lines of their own (the line of
// each key was counted from the start: 4 MiB took 17.7 s, 16 MiB 653 s),
// repeated keys, names the form lacks (each looked for a suggestion among
// every field), escapes. Each makes about n repetitions of its pattern.
var pathologicalValues = []struct {
	name string
	gen  func(n int) string
}{
	{"one key per line", func(n int) string {
		var b strings.Builder
		b.WriteString("{\n")
		for i := range n {
			fmt.Fprintf(&b, "\"f%d\": \"x\",\n", i%MaxFields)
		}
		return strings.TrimSuffix(b.String(), ",\n") + "\n}"
	}},
	{"unknown names", func(n int) string {
		var b strings.Builder
		b.WriteString("{\n")
		for i := range n {
			fmt.Fprintf(&b, "\"nope%d\": 1,\n", i)
		}
		return strings.TrimSuffix(b.String(), ",\n") + "\n}"
	}},
	{"repeated key", func(n int) string { return "{" + strings.Repeat("\"a\": 1,\n", n) + "\"a\": 1}" }},
	{"escaped text", func(n int) string { return `{"f1": "` + strings.Repeat(`\"\u00e9\n`, n) + `"}` }},
	{"deep arrays", func(n int) string {
		return `{"f1": ` + strings.Repeat("[", min(n, 9000)) + strings.Repeat("]", min(n, 9000)) + strings.Repeat(` `, n) + `}`
	}},
}

// costOfValues is the work the values cost before any qpdf: parse and
// check against a form of MaxFields fields.
func costOfValues(fm *form, src []byte) {
	vals, err := parseValues(src)
	if err == nil {
		_, _ = resolveValues(fm, vals)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cost is the least CPU time one check of src takes over a few rounds
// (each repeats it for at least 40 ms, with the collector off), and the
// bytes one check allocates.
func cost(fm *form, src []byte, rounds int) (time.Duration, uint64) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	best := time.Duration(1 << 62)
	var alloc uint64
	for range rounds {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		costOfValues(fm, src)
		runtime.ReadMemStats(&m1)
		alloc = m1.TotalAlloc - m0.TotalAlloc
		start := cpuTime()
		n := 0
		for n == 0 || cpuTime()-start < 40*time.Millisecond {
			costOfValues(fm, src)
			n++
		}
		best = min(best, (cpuTime()-start)/time.Duration(n))
	}
	return best, alloc
}

// TestPathologicalValues checks every family at n and 2n bytes: doubling
// the input may at most about double the CPU time and the bytes allocated
// (×3 allowed; quadratic work grows ×4). A ratio of two runs in one
// process, not a timed assertion; left out of race builds, which change
// what costs what (`make test` runs it once more without the detector).
func TestPathologicalValues(t *testing.T) {
	const maxGrowth = 3.0
	fm := textForm(MaxFields)
	for _, f := range pathologicalValues {
		t.Run(f.name, func(t *testing.T) {
			unit := max(1, len(f.gen(1000))/1000)
			n := max(1, *pathologicalSize/unit)
			small, large := []byte(f.gen(n)), []byte(f.gen(2*n))
			costOfValues(fm, small)
			t1, a1 := cost(fm, small, 3)
			t2, a2 := cost(fm, large, 3)
			per := 2 / (float64(len(large)) / float64(len(small)))
			tr := per * float64(t2) / float64(max(t1, time.Microsecond))
			ar := per * float64(a2) / float64(max(a1, 1<<16))
			t.Logf("%d → %d bytes: %v → %v (×%.2f), %d → %d KB allocated (×%.2f)", len(small), len(large), t1, t2, tr, a1>>10, a2>>10, ar)
			if tr > maxGrowth {
				// One more try: a neighbour's burst can land on one side.
				t1, _ = cost(fm, small, 5)
				t2, _ = cost(fm, large, 5)
				tr = per * float64(t2) / float64(max(t1, time.Microsecond))
			}
			if tr > maxGrowth {
				t.Errorf("doubling the values (%d → %d bytes) took %v → %v, ×%.2f, want at most ×%.1f", len(small), len(large), t1, t2, tr, maxGrowth)
			}
			if ar > maxGrowth {
				t.Errorf("doubling the values (%d → %d bytes) allocated %d → %d KB, ×%.2f, want at most ×%.1f", len(small), len(large), a1>>10, a2>>10, ar, maxGrowth)
			}
		})
	}
}
