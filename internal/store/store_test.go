package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

func TestValidKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"jobs/0190/input/document.md", true},
		{"jobs/0190/input/assets/img%2Fa.png", true},
		{"jobs/0190/result.pdf", true},
		{"", false},
		{"/etc/passwd", false},
		{"jobs/../../etc/passwd", false},
		{"jobs/./x", false},
		{"jobs//x", false},
		{"jobs/x/", false},
		{"..", false},
		{"jobs\\x", false},
		{"jobs/\x00", false},
		{"jobs/.tmp-abc", false},
		{strings.Repeat("a", maxKeyBytes+1), false},
	}
	for _, tt := range tests {
		if got := ValidKey(tt.key); got != tt.want {
			t.Errorf("ValidKey(%q) = %v, want %v", tt.key, got, tt.want)
		}
	}
}

func TestPutGetDelete(t *testing.T) {
	ctx := context.Background()
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "jobs/a/document.md", strings.NewReader("# hi")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "jobs/a/result.pdf", strings.NewReader("%PDF")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "jobs/b/result.pdf", strings.NewReader("other")); err != nil {
		t.Fatal(err)
	}
	// A second Put replaces the object whole.
	if err := s.Put(ctx, "jobs/a/document.md", strings.NewReader("# second")); err != nil {
		t.Fatal(err)
	}
	if got, want := read(t, s, "jobs/a/document.md"), "# second"; got != want {
		t.Errorf("Get(document.md) = %q, want %q", got, want)
	}

	names, err := s.List(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(names), "[a b]"; got != want {
		t.Errorf("List(jobs) = %s, want %s", got, want)
	}

	if err := s.Delete(ctx, "jobs/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "jobs/a/result.pdf"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
	if got, want := read(t, s, "jobs/b/result.pdf"), "other"; got != want {
		t.Errorf("Get(other job) after Delete = %q, want %q", got, want)
	}
	// Deleting twice, or what never existed, is fine.
	if err := s.Delete(ctx, "jobs/a/"); err != nil {
		t.Errorf("Delete(missing) = %v, want nil", err)
	}
	if names, err := s.List(ctx, "jobs/none"); err != nil || len(names) != 0 {
		t.Errorf("List(missing) = %v, %v, want empty, nil", names, err)
	}
}

func TestInvalidKeysAreRefused(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := NewFS(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"../escape", "/abs", "jobs/../../escape", ""} {
		if err := s.Put(ctx, key, strings.NewReader("x")); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file escaped the store root: %v", err)
	}
}

// failingReader yields some bytes and then an error, like a client whose
// upload breaks off.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("connection reset")
	}
	f.n--
	return copy(p, "partial"), nil
}

func TestPutIsAtomic(t *testing.T) {
	ctx := context.Background()
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "jobs/a/result.pdf", strings.NewReader("complete")); err != nil {
		t.Fatal(err)
	}
	// A failed write leaves the earlier object as it was and no temp file.
	if err := s.Put(ctx, "jobs/a/result.pdf", &failingReader{n: 3}); err == nil {
		t.Fatal("Put(failing reader) = nil, want an error")
	}
	if got, want := read(t, s, "jobs/a/result.pdf"), "complete"; got != want {
		t.Errorf("Get after failed Put = %q, want %q", got, want)
	}
	entries, err := os.ReadDir(filepath.Join(s.Root(), "jobs", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("files after failed Put = %d, want 1 (no temp file left)", len(entries))
	}

	// A cancelled context stops the write and leaves nothing behind.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Put(cctx, "jobs/c/result.pdf", strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put(cancelled) = %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx, "jobs/c/result.pdf"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after cancelled Put = %v, want ErrNotFound", err)
	}
}

func TestConcurrentPutsOfOneKey(t *testing.T) {
	ctx := context.Background()
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	bodies := make([]string, 16)
	for i := range bodies {
		bodies[i] = strings.Repeat(string(rune('a'+i)), 100_000)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Put(ctx, "jobs/x/result.pdf", strings.NewReader(bodies[i])); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := read(t, s, "jobs/x/result.pdf")
	found := false
	for _, b := range bodies {
		found = found || got == b
	}
	if !found {
		t.Errorf("Get after concurrent Puts returned a mix of writes (%d bytes)", len(got))
	}
}

func read(t *testing.T, s *FS, key string) string {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q) = %v", key, err)
	}
	defer func() { _ = rc.Close() }()
	var b bytes.Buffer
	if _, err := io.Copy(&b, rc); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestCreateAllRefusals: a cancelled write and an invalid key store
// nothing.
func TestCreateAllRefusals(t *testing.T) {
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.CreateAll(ctx, map[string][]byte{"jobs/b/document.md": []byte("# doc")}); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateAll(cancelled) = %v, want context.Canceled", err)
	}
	if _, err := s.Get(context.Background(), "jobs/b/document.md"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after cancelled CreateAll = %v, want ErrNotFound", err)
	}
	if err := s.CreateAll(context.Background(), map[string][]byte{"../x": []byte("x")}); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("CreateAll(../x) = %v, want ErrInvalidKey", err)
	}
}

func TestCreateAll(t *testing.T) {
	ctx := context.Background()
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string][]byte{
		"jobs/a/document.md":  []byte("# doc"),
		"jobs/a/assets/x.png": []byte("png"),
	}
	if err := s.CreateAll(ctx, objs); err != nil {
		t.Fatal(err)
	}
	for key, want := range objs {
		if got := read(t, s, key); got != string(want) {
			t.Errorf("Get(%q) after CreateAll = %q, want %q", key, got, want)
		}
	}
	// One refused object fails the call and removes the others it wrote,
	// but never an object that was there before.
	err = s.CreateAll(ctx, map[string][]byte{
		"jobs/b/a.md":        []byte("a"),
		"jobs/a/document.md": []byte("other"),
		"jobs/b/z.md":        []byte("z"),
	})
	if !errors.Is(err, os.ErrExist) {
		t.Errorf("CreateAll(one existing key) = %v, want ErrExist", err)
	}
	for _, key := range []string{"jobs/b/a.md", "jobs/b/z.md"} {
		if _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%q) after failed CreateAll = %v, want ErrNotFound", key, err)
		}
	}
	if got, want := read(t, s, "jobs/a/document.md"), "# doc"; got != want {
		t.Errorf("Get(existing) after failed CreateAll = %q, want %q", got, want)
	}
}

// TestGroupSync runs many concurrent CreateAll calls: each must return
// only after a sync that started after its write, and the syncs are shared,
// so there are never more of them than calls.
func TestGroupSync(t *testing.T) {
	ctx := context.Background()
	s, err := NewFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.CreateAll(ctx, map[string][]byte{fmt.Sprintf("jobs/%d/document.md", i): []byte("x")})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent CreateAll = %v, want nil", err)
		}
	}
	s.gs.mu.Lock()
	started, done, running := s.gs.started, s.gs.done, s.gs.running
	s.gs.mu.Unlock()
	if running || done != started {
		t.Errorf("after all CreateAll calls returned: running %v, started %d, done %d; want idle", running, started, done)
	}
	if started < 1 || started > n {
		t.Errorf("syncs for %d concurrent CreateAll calls = %d, want 1..%d", n, started, n)
	}
	t.Logf("%d concurrent CreateAll calls shared %d syncs", n, started)
}

// TestGroupSyncError reports a failed sync to every caller that needed it.
func TestGroupSyncError(t *testing.T) {
	g := newGroupSync(filepath.Join(t.TempDir(), "missing"))
	if err := g.sync(); err == nil {
		t.Fatal("sync of a missing root = nil, want an error")
	}
	if g.running || g.done != 1 {
		t.Errorf("after a failed sync: running %v, done %d; want idle after 1", g.running, g.done)
	}
}

// TestGroupSyncOrder checks the group commit's one promise: a caller that
// arrives while a sync runs is not released by that sync (it may have
// started before the caller's write) but by the next one.
func TestGroupSyncOrder(t *testing.T) {
	var calls int
	release := make(chan struct{})
	entered := make(chan int)
	g := newGroupSync("")
	g.do = func() error {
		calls++ // guarded: only one sync runs at a time
		n := calls
		entered <- n
		<-release
		return nil
	}
	first := make(chan error)
	go func() { first <- g.sync() }()
	if n := <-entered; n != 1 {
		t.Fatalf("first sync call = %d, want 1", n)
	}
	second := make(chan error)
	go func() { second <- g.sync() }()
	// Wait until the second caller is parked behind the running sync.
	testenv.Eventually(t, "the second caller parked behind the running sync", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.waiting == 1
	})
	release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatalf("first sync = %v", err)
	}
	select {
	case err := <-second:
		t.Fatalf("second caller returned (%v) after the sync that was running when it arrived", err)
	case n := <-entered:
		if n != 2 {
			t.Fatalf("second sync call = %d, want 2", n)
		}
	}
	release <- struct{}{}
	if err := <-second; err != nil {
		t.Fatalf("second sync = %v", err)
	}
}
