package tex

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

// storedFormats lists the formats in the store folder dir.
func storedFormats(t *testing.T, dir string) []string {
	t.Helper()
	fmts, err := filepath.Glob(filepath.Join(dir, "*.fmt"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fmts {
		if !strings.HasPrefix(filepath.Base(f), ".tmp-") {
			out = append(out, f)
		}
	}
	return out
}

// TestPoolFormatStore: a pool dumps its format and publishes it to the
// store; a later pool on the same store (a restarted process) takes it
// instead of dumping, loads it, and keeps typesetting after the stored
// copy is evicted, because it took a link of its own.
func TestPoolFormatStore(t *testing.T) {
	store := filepath.Join(t.TempDir(), "formats") // made by the pool
	run := func(p *Pool, what string) {
		t.Helper()
		res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: what + ".\n"})
		if err != nil {
			t.Fatalf("%s: Run: %v", what, err)
		}
		if !strings.Contains(res.Log, `CUSTOMISED FORMAT: "outprint"`) {
			t.Errorf("%s did not load the dumped format:\n%s", what, short(res.Log))
		}
	}

	first := startTestPool(t, PoolConfig{FormatStore: store})
	run(first, "First pool")
	if st := first.Stats(); st.Dumped != 1 || st.Stored != 0 {
		t.Errorf("first pool: Dumped, Stored = %d, %d, want 1, 0", st.Dumped, st.Stored)
	}
	if err := first.Close(context.Background()); err != nil {
		t.Fatalf("first pool: Close: %v", err)
	}
	stored := storedFormats(t, store)
	if len(stored) != 1 {
		t.Fatalf("store after the first pool = %v, want one format", stored)
	}
	if left, _ := filepath.Glob(filepath.Join(store, ".tmp-*")); len(left) != 0 {
		t.Errorf("store after the first pool holds temporary files %v", left)
	}

	second := startTestPool(t, PoolConfig{FormatStore: store})
	run(second, "Second pool")
	if st := second.Stats(); st.Dumped != 0 || st.Stored != 1 {
		t.Errorf("second pool: Dumped, Stored = %d, %d, want 0, 1", st.Dumped, st.Stored)
	}
	taken, _ := filepath.Glob(filepath.Join(second.fmtDir, "*", "outprint.fmt"))
	if len(taken) != 1 {
		t.Fatalf("second pool's formats = %v, want one", taken)
	}
	fiStored, err1 := os.Stat(stored[0])
	fiTaken, err2 := os.Stat(taken[0])
	if err1 != nil || err2 != nil || !os.SameFile(fiStored, fiTaken) {
		t.Errorf("second pool's format %s is not a link of the stored %s (%v, %v)", taken[0], stored[0], err1, err2)
	}

	// Another process evicts the stored format: this pool's link stays,
	// and its next processes still load it.
	if err := os.Remove(stored[0]); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		run(second, fmt.Sprintf("After eviction %d", i))
	}
	if st := second.Stats(); st.Dumped != 0 {
		t.Errorf("second pool dumped %d formats after the eviction, want 0 (it keeps its own link)", st.Dumped)
	}
}

// TestFormatStoreName: a stored format is named after the format key and
// the TeX installation, so a TeX whose base format was dumped again (a
// package upgrade) does not take an old dump, and a TeX whose
// installation cannot be read does not use the store at all.
func TestFormatStoreName(t *testing.T) {
	testenv.Require(t, "xelatex", "kpsewhich")
	real, err := newSandbox(RunnerConfig{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := openFormatStore(filepath.Join(dir, "store"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A TeX installation of our own: the real engine, and a kpsewhich
	// that names a base format we can touch.
	inst := filepath.Join(dir, "tex")
	if err := os.Mkdir(inst, 0o755); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "xelatex.fmt")
	if err := os.WriteFile(base, []byte("base"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real.program, filepath.Join(inst, "xelatex")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inst, "kpsewhich"), []byte("#!/bin/sh\necho "+base+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	own := real
	own.program = filepath.Join(inst, "xelatex")
	broken := real
	broken.program = filepath.Join(dir, "nowhere", "xelatex")

	fresh := func(sb *sandbox) string { // a new store: identities are read once per store
		t.Helper()
		s, err := openFormatStore(filepath.Join(dir, "store"), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return s.name(context.Background(), sb, "key")
	}
	realName := s.name(context.Background(), &real, "key")
	ownName := fresh(&own)
	if err := os.Chtimes(base, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	upgraded := fresh(&own)
	for _, c := range []struct {
		what string
		got  string
		bad  bool // want "" (no store)
		not  []string
	}{
		{what: "the installed TeX", got: realName},
		{what: "the same TeX, another key", got: s.name(context.Background(), &real, "other"), not: []string{realName}},
		{what: "another installation", got: ownName, not: []string{realName}},
		{what: "that installation after its base format changed", got: upgraded, not: []string{realName, ownName}},
		{what: "an installation without kpsewhich", got: fresh(&broken), bad: true},
	} {
		switch {
		case c.bad && c.got != "":
			t.Errorf("name(%s) = %q, want \"\" (the store unused)", c.what, c.got)
		case !c.bad && !strings.HasSuffix(c.got, ".fmt"):
			t.Errorf("name(%s) = %q, want a .fmt file name", c.what, c.got)
		}
		for _, n := range c.not {
			if c.got == n {
				t.Errorf("name(%s) = %q, the name of another format", c.what, c.got)
			}
		}
	}
}

// TestFormatStoreEvict: publishing keeps the most recently used formats
// within the count and byte bounds, and removes temporary files that a
// process killed mid-publish left, but not a fresh one of a publish under
// way.
func TestFormatStoreEvict(t *testing.T) {
	dir := t.TempDir()
	s, err := openFormatStore(dir, 2, 1000)
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	old := time.Now().Add(-time.Hour)
	publish := func(name string, size int, age time.Duration) {
		t.Helper()
		p := filepath.Join(src, name)
		if err := os.WriteFile(p+".fmt", make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		// Before publishing: the stored file is a link of this one and
		// has its times. A file's own times tick coarser than time.Now.
		if err := os.Chtimes(p+".fmt", old, time.Now().Add(-age)); err != nil {
			t.Fatal(err)
		}
		s.publish(name+".fmt", p)
	}
	staleTmp, freshTmp := filepath.Join(dir, ".tmp-1-1-x.fmt"), filepath.Join(dir, ".tmp-2-2-y.fmt")
	for _, p := range []string{staleTmp, freshTmp} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(staleTmp, old, old); err != nil {
		t.Fatal(err)
	}
	publish("a", 100, 3*time.Minute)
	publish("b", 100, 2*time.Minute)
	// Taking a makes it the most recently used: c evicts b.
	if _, ok := s.take("a.fmt", filepath.Join(t.TempDir(), "taken")); !ok {
		t.Fatal("take(a.fmt) found nothing")
	}
	publish("c", 100, time.Minute)
	got := storedFormats(t, dir)
	want := []string{filepath.Join(dir, "a.fmt"), filepath.Join(dir, "c.fmt")}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after a, b, take a, c (at most 2): store = %v, want %v", got, want)
	}
	// d is over the byte bound with either of them: both go.
	publish("d", 950, -time.Minute) // newer than the take of a
	got = storedFormats(t, dir)
	want = []string{filepath.Join(dir, "d.fmt")}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("after d (950 of 1000 bytes): store = %v, want %v", got, want)
	}
	if _, err := os.Stat(staleTmp); !os.IsNotExist(err) {
		t.Errorf("stale temporary file %s stayed (%v)", staleTmp, err)
	}
	if _, err := os.Stat(freshTmp); err != nil {
		t.Errorf("fresh temporary file %s was removed: %v", freshTmp, err)
	}
	if _, ok := s.take("b.fmt", filepath.Join(t.TempDir(), "taken")); ok {
		t.Error("take(b.fmt) after its eviction found it")
	}
}
