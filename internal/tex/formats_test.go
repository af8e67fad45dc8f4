package tex

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestFormatCacheLRU: the cache keeps at most maxCount formats and
// maxBytes bytes, drops the least recently used first, never a pinned
// one, builds each head once while it is kept, and again after eviction.
func TestFormatCacheLRU(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	builds := map[string]int{}
	build := func(d, head string) (string, error) {
		mu.Lock()
		builds[head]++
		mu.Unlock()
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", err
		}
		size := 100
		if strings.HasPrefix(head, "big") {
			size = 1000
		}
		return filepath.Join(d, "outprint"), os.WriteFile(filepath.Join(d, "outprint.fmt"), make([]byte, size), 0o600)
	}
	c := newFormatCache(dir, 2, 1500)
	acquire := func(head string) (string, func()) {
		return c.acquire(head, nil, func(d string) (string, error) { return build(d, head) })
	}
	use := func(head string) string {
		p, release := acquire(head)
		release()
		return p
	}
	kept := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "*", "outprint.fmt"))
		return len(m)
	}
	a := use("a")
	use("b")
	use("a") // a is now the most recent
	use("c") // evicts b
	if n, _ := c.stats(); n != 2 || kept() != 2 {
		t.Errorf("after a, b, a, c: %d formats, %d on disk, want 2", n, kept())
	}
	if _, err := os.Stat(a + ".fmt"); err != nil {
		t.Errorf("format a was evicted though it was used more recently than b: %v", err)
	}
	use("b")
	if builds["a"] != 1 || builds["b"] != 2 || builds["c"] != 1 {
		t.Errorf("builds = %v, want a 1, b 2 (rebuilt after eviction), c 1", builds)
	}

	// Bytes: a pinned format stays even over the bound; it goes once
	// released and the cache is still over.
	big, release := acquire("big1")
	use("big2") // 1000 + 1000 > 1500: big2 is unpinned and newest, the rest go
	if _, err := os.Stat(big + ".fmt"); err != nil {
		t.Errorf("pinned format was deleted: %v", err)
	}
	release()
	if n, b := c.stats(); b > 1500 || n > 2 {
		t.Errorf("after release: %d formats, %d bytes, want at most 2 and 1500", n, b)
	}
	if got := kept(); got != func() int { n, _ := c.stats(); return n }() {
		t.Errorf("%d formats on disk, cache says otherwise", got)
	}
}

// TestPoolFormatsShared: preambles that differ only after the dump marker
// (the fonts of other scripts) share one format, so the scratch folder
// does not grow by a 33 MB format per script set (issue 10).
func TestPoolFormatsShared(t *testing.T) {
	p := startTestPool(t, PoolConfig{})
	for i, extra := range []string{"", "\\newfontfamily\\fa{Noto Sans}\n", "\\newfontfamily\\fb{Noto Sans Mono}\n"} {
		pre := testPreamble + extra
		res, err := p.Run(context.Background(), Job{Preamble: pre, Body: fmt.Sprintf("Script set %d.\n", i)})
		if err != nil {
			t.Fatalf("Run %d: %v", i, err)
		}
		if !strings.Contains(res.Log, `CUSTOMISED FORMAT: "outprint"`) {
			t.Errorf("run %d did not load the dumped format:\n%s", i, short(res.Log))
		}
	}
	fmts, _ := filepath.Glob(filepath.Join(p.fmtDir, "*", "outprint.fmt"))
	if len(fmts) != 1 {
		t.Errorf("formats = %v, want one shared by the three preambles", fmts)
	}
}

// TestFormatCacheCanceled: a build stopped because its pool closes
// (errFormatCanceled) is not remembered as a broken format: a pool that
// waited for it builds it itself, and so does the next acquire. A waiter
// whose own pool closes stops waiting.
func TestFormatCacheCanceled(t *testing.T) {
	dir := t.TempDir()
	c := newFormatCache(dir, 0, 0)
	started, cancelBuild := make(chan struct{}), make(chan struct{})
	canceled := func(d string) (string, error) {
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", err
		}
		close(started)
		<-cancelBuild
		return "", errFormatCanceled
	}
	builds := 0
	good := func(d string) (string, error) {
		builds++
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", err
		}
		return filepath.Join(d, "outprint"), os.WriteFile(filepath.Join(d, "outprint.fmt"), []byte("format"), 0o600)
	}

	first := make(chan string, 1)
	go func() {
		p, release := c.acquire("k", nil, canceled)
		release()
		first <- p
	}()
	<-started
	stop := make(chan struct{})
	gaveUp := make(chan string, 1)
	go func() {
		p, release := c.acquire("k", stop, good)
		release()
		gaveUp <- p
	}()
	waiter := make(chan string, 1)
	go func() {
		p, release := c.acquire("k", nil, good)
		release()
		waiter <- p
	}()
	close(stop)
	if p := <-gaveUp; p != "" {
		t.Errorf("acquire whose stop closed during another's build = %q, want \"\"", p)
	}
	close(cancelBuild)
	if p := <-first; p != "" {
		t.Errorf("acquire whose build was canceled = %q, want \"\"", p)
	}
	want := filepath.Join(dir, "k", "outprint")
	if p := <-waiter; p != want {
		t.Errorf("acquire that waited for a canceled build = %q, want %q (built by itself)", p, want)
	}
	if p, release := c.acquire("k", nil, good); p != want || builds != 1 {
		t.Errorf("acquire after = %q with %d builds, want %q built once", p, builds, want)
	} else {
		release()
	}
}

// TestPoolsShareFormats: pools with the same Formats dump a preamble's
// package part once; each of them loads that format; the format outlives
// the pools until Formats is closed.
func TestPoolsShareFormats(t *testing.T) {
	f, err := NewFormats(t.TempDir(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p := startTestPool(t, PoolConfig{Formats: f})
		res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: fmt.Sprintf("Pool %d.\n", i)})
		if err != nil {
			t.Fatalf("pool %d: Run: %v", i, err)
		}
		if !strings.Contains(res.Log, `CUSTOMISED FORMAT: "outprint"`) {
			t.Errorf("pool %d did not load the dumped format:\n%s", i, short(res.Log))
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatalf("pool %d: Close: %v", i, err)
		}
		if n, _ := f.c.stats(); n != 1 {
			t.Errorf("after pool %d: %d formats, want the one shared", i, n)
		}
		fmts, _ := filepath.Glob(filepath.Join(f.c.dir, "*", "outprint.fmt"))
		if len(fmts) != 1 {
			t.Errorf("after pool %d: formats on disk = %v, want one", i, fmts)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.c.dir); !os.IsNotExist(err) {
		t.Errorf("Formats.Close left %s (%v)", f.c.dir, err)
	}
}
