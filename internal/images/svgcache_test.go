package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

// TestSVGCache converts an SVG, then converts it again with a sandbox
// that would time out at once: the second conversion succeeds only if it
// comes from the cache, and its PDF is the first one's.
func TestSVGCache(t *testing.T) {
	testenv.Require(t, "rsvg-convert")
	set, err := Load(context.Background(), []Ref{{"diagram.svg", 1}}, Dir("testdata/good"))
	if err != nil {
		t.Fatal(err)
	}
	cache := NewSVGCache(1 << 20)
	dir1 := t.TempDir()
	first, err := set.convert(context.Background(), dir1, defaultSandbox(), cache)
	if err != nil {
		t.Fatalf("first convert = %v", err)
	}
	if cache.Len() != 1 {
		t.Fatalf("cache holds %d PDFs after one conversion, want 1", cache.Len())
	}
	stalled := defaultSandbox()
	stalled.timeout = time.Nanosecond
	dir2 := t.TempDir()
	second, err := set.convert(context.Background(), dir2, stalled, cache)
	if err != nil {
		t.Fatalf("second convert (cached) = %v, want the cached PDF", err)
	}
	a, _ := os.ReadFile(filepath.Join(dir1, first["diagram.svg"].File))
	b, _ := os.ReadFile(filepath.Join(dir2, second["diagram.svg"].File))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("cached PDF (%d bytes) differs from the converted one (%d bytes)", len(b), len(a))
	}
	if first["diagram.svg"].Width != second["diagram.svg"].Width || first["diagram.svg"].Height != second["diagram.svg"].Height {
		t.Errorf("cached size %v, want %v", second["diagram.svg"], first["diagram.svg"])
	}
	// Without the cache the stalled sandbox fails: the test above could fail.
	if _, err := set.convert(context.Background(), t.TempDir(), stalled, nil); err == nil {
		t.Error("convert with a sandbox that times out at once and no cache = nil, want an error")
	}
}

// TestSVGCacheBound: the cache forgets the least recently used PDFs once
// it holds more bytes than its bound.
func TestSVGCacheBound(t *testing.T) {
	c := NewSVGCache(250)
	key := func(s string) [32]byte { return sha256.Sum256([]byte(s)) }
	pdf := bytes.Repeat([]byte("x"), 100)
	c.put(key("a"), pdf, 1, 1)
	c.put(key("b"), pdf, 1, 1)
	if _, _, _, ok := c.get(key("a")); !ok { // a is now the most recently used
		t.Fatal("get(a) missed before the bound was reached")
	}
	c.put(key("c"), pdf, 1, 1)
	for k, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if _, _, _, ok := c.get(key(k)); ok != want {
			t.Errorf("get(%s) = %v after the third put, want %v", k, ok, want)
		}
	}
	c.put(key("big"), bytes.Repeat([]byte("x"), 300), 1, 1)
	if _, _, _, ok := c.get(key("big")); ok {
		t.Error("a PDF larger than the whole bound was kept")
	}
}
