package jobs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// TestRaceUninstrumented checks the packages that `make test` compiles
// without the race detector's instrumentation (the Makefile's
// RACE_UNINSTRUMENTED: SQLite translated to Go and its C library). That
// is sound only while each of them
//   - is SQLite's, reached by this package (a misspelt or stale name
//     would leave nothing out, or something else), and
//   - instantiates no generic function or type of another package: an
//     instantiation is emitted in every package that uses it and the
//     linker keeps one copy, so an uninstrumented copy of, say, sync.Map's
//     internals would be what instrumented code runs too, and the detector
//     would miss its synchronisation and report races that are not there
//     (seen with modernc.org/sqlite itself, which uses sync.Map).
//
// Type equality and hash functions (type:.eq., type:.hash.) are allowed:
// they compare memory and synchronise nothing.
func TestRaceUninstrumented(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "go")
	pkgs := raceUninstrumented(t, "../../Makefile")
	if len(pkgs) == 0 {
		t.Fatal("the Makefile names no RACE_UNINSTRUMENTED packages; this test reads that line")
	}
	deps, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	own := map[string]bool{}
	for _, d := range strings.Fields(string(deps)) {
		own[d] = true
	}
	// The object files are compiled as make test compiles them, every
	// package of the line without the instrumentation at once: with only
	// the one at hand left out, its dependencies among the others would
	// be compiled instrumented, outside Go's cache (most of a minute of
	// CPU for SQLite's C library).
	args := []string{"list", "-export", "-race", "-f", "{{.ImportPath}} {{.Export}}"}
	for _, p := range pkgs {
		args = append(args, "-gcflags="+p+"=-race=false")
	}
	var checked []string
	for _, p := range pkgs {
		if !strings.HasPrefix(p, "modernc.org/") || !own[p] {
			t.Errorf("RACE_UNINSTRUMENTED names %s, want only SQLite's packages (modernc.org/…) that internal/jobs links", p)
			continue
		}
		checked = append(checked, p)
	}
	if len(checked) == 0 {
		return
	}
	out, err := exec.Command("go", append(args, checked...)...).Output()
	if err != nil {
		t.Fatalf("go list -export %s: %v", strings.Join(checked, " "), err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, export, ok := strings.Cut(line, " "); ok {
			exports[p] = export
		}
	}
	for _, p := range checked {
		if exports[p] == "" {
			t.Fatalf("go list -export gave no object file for %s: %s", p, out)
		}
		nm, err := exec.Command("go", "tool", "nm", exports[p]).Output()
		if err != nil {
			t.Fatalf("go tool nm %s: %v", p, err)
		}
		if got := foreignInstantiations(p, nm); len(got) > 0 {
			t.Errorf("%s instantiates generic code of other packages, which its uninstrumented copy would replace for everyone: %s", p, strings.Join(got, ", "))
		}
	}
}

// raceUninstrumented reads the packages of the RACE_UNINSTRUMENTED line
// of the Makefile at path.
func raceUninstrumented(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "RACE_UNINSTRUMENTED :="); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// nmDefined matches a symbol that `go tool nm` lists as defined text.
var nmDefined = regexp.MustCompile(`^\s*[0-9a-f]+\s+T\s+(.+)$`)

// foreignInstantiations returns the generic instantiations of other
// packages among the functions defined in pkg's object file (nm's
// listing), type equality and hash functions aside.
func foreignInstantiations(pkg string, nm []byte) []string {
	var got []string
	for _, line := range strings.Split(string(nm), "\n") {
		m := nmDefined.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		sym := m[1]
		if !strings.Contains(sym, "[") || strings.HasPrefix(sym, pkg+".") ||
			strings.HasPrefix(sym, "type:.eq.") || strings.HasPrefix(sym, "type:.hash.") {
			continue
		}
		if !slices.Contains(got, sym) {
			got = append(got, sym)
		}
	}
	return got
}

// TestForeignInstantiations: the symbols that make a package unfit to be
// left uninstrumented, from `go tool nm` lines.
func TestForeignInstantiations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		nm   string
		want []string
	}{
		{"own generic", "  4f20 T modernc.org/libc.X[go.shape.int]", nil},
		{"type equality", "  4f20 T type:.eq.[2]interface {}", nil},
		{"non-generic", "  4f20 T modernc.org/libc.Xmalloc\n  4f30 T sync.(*Mutex).Lock", nil},
		{"referenced, not defined", "         U internal/sync.(*HashTrieMap[go.shape.interface {},go.shape.interface {}]).Load", nil},
		{"sync.Map's internals", "  4f20 T internal/sync.(*HashTrieMap[go.shape.interface {},go.shape.interface {}]).Load",
			[]string{"internal/sync.(*HashTrieMap[go.shape.interface {},go.shape.interface {}]).Load"}},
		{"atomic.Pointer", "  4f20 T sync/atomic.(*Pointer[go.shape.struct {}]).Load", []string{"sync/atomic.(*Pointer[go.shape.struct {}]).Load"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := foreignInstantiations("modernc.org/libc", []byte(tt.nm))
			if !slices.Equal(got, tt.want) {
				t.Errorf("foreignInstantiations(%q) = %q, want %q", tt.nm, got, tt.want)
			}
		})
	}
}
