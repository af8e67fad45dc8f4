package tex

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Bounds of the dumped formats a Pool keeps (PoolConfig.MaxFormats and
// MaxFormatBytes). A format is some 33 MB uncompressed. It holds only the
// package part of a preamble (before the dump marker), which depends on
// the paper and not on the scripts a document needs, so formats are keyed
// by that part: the usual preambles share two formats (A4 and letter)
// however many script sets documents bring. Before this, every (paper,
// script set) dumped its own copy of the same packages and none was ever
// removed: twelve tiny requests grew the scratch folder by 316 MB, and
// 2 papers × 2⁷ script sets allowed some 8 GB (issue 10). The LRU bounds
// keep that finite for callers with other preambles.
const (
	DefaultMaxFormats     = 8
	DefaultMaxFormatBytes = 320 << 20
)

// Formats are dumped formats shared by the Pools of one process that set
// PoolConfig.Formats: a preamble's package part is dumped once for all of
// them instead of once per pool (some 2.4 CPU seconds each). A format is
// keyed by everything that decides what is dumped and whether the dump
// succeeds: the package part, the TeX programs, and the sandbox's PATH,
// font folder and rlimits. The warm-up timeout is not: a dump that ran out
// of it is remembered as failed for every pool, as a pool's own cache
// remembers it. The owner closes Formats after the pools that use it.
type Formats struct {
	c *formatCache
}

// NewFormats makes the folder of shared formats under dir (default
// os.TempDir()), bounded by maxCount formats and maxBytes bytes (defaults
// DefaultMaxFormats and DefaultMaxFormatBytes).
func NewFormats(dir string, maxCount int, maxBytes int64) (*Formats, error) {
	d, err := os.MkdirTemp(dir, "outprint-formats-")
	if err != nil {
		return nil, fmt.Errorf("format folder: %w", err)
	}
	return &Formats{c: newFormatCache(d, maxCount, maxBytes)}, nil
}

// Close removes the formats. The pools that use them must be closed first.
func (f *Formats) Close() error {
	return os.RemoveAll(f.c.dir)
}

// errFormatCanceled is the error of a build stopped because its pool
// closes: the format is not remembered as broken, and whoever waits for
// it builds it again.
var errFormatCanceled = errors.New("the pool closed")

// formatCache is the formats of a Pool, or of several (Formats), least
// recently used first out. A format is pinned while a process loads it
// (acquire until release), so it is never deleted under a starting TeX;
// once loaded, TeX needs the file no more.
type formatCache struct {
	dir      string
	maxCount int
	maxBytes int64

	mu      sync.Mutex
	entries map[string]*fmtEntry
	lru     list.List // of *fmtEntry, most recently used at the front
	bytes   int64
}

type fmtEntry struct {
	key      string
	path     string // "" when the build failed: processes start without
	size     int64
	pins     int
	done     chan struct{} // closed when the build ended
	canceled bool          // the build was stopped (errFormatCanceled); set before done closes
	elem     *list.Element
}

func newFormatCache(dir string, maxCount int, maxBytes int64) *formatCache {
	maxCount, maxBytes = formatBounds(maxCount, maxBytes)
	return &formatCache{dir: dir, maxCount: maxCount, maxBytes: maxBytes, entries: map[string]*fmtEntry{}}
}

// formatBounds fills in the default bounds of a formats cache or store.
func formatBounds(maxCount int, maxBytes int64) (int, int64) {
	if maxCount <= 0 {
		maxCount = DefaultMaxFormats
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFormatBytes
	}
	return maxCount, maxBytes
}

// formatKey is the cache key of the format of head built in sandbox sb:
// everything that decides what the dump holds and whether it succeeds.
func formatKey(sb *sandbox, head string) string {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%q %q %q %q %d %d %d\n", sb.program, sb.xdvipdfmx, sb.path, sb.fonts, sb.memoryBytes, sb.processes, sb.scratchBytes)
	h.Write([]byte(head))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// acquire returns the path (without ".fmt") of the format of key, built by
// build into the folder it is given (which it makes) on first use, and
// pins it until release is called. The path is "" when the build failed,
// or when stop closed while the format was being built by someone else.
// A failed build is remembered like a format (and evicted like one), so a
// broken preamble is not dumped again on every warm-up; a canceled one
// (errFormatCanceled) is forgotten, and its waiters build it themselves.
func (c *formatCache) acquire(key string, stop <-chan struct{}, build func(dir string) (string, error)) (path string, release func()) {
	for {
		c.mu.Lock()
		e := c.entries[key]
		building := e == nil
		if building {
			e = &fmtEntry{key: key, done: make(chan struct{})}
			c.entries[key] = e
			e.elem = c.lru.PushFront(e)
		} else {
			c.lru.MoveToFront(e.elem)
		}
		e.pins++
		c.mu.Unlock()

		if building {
			p, err := build(filepath.Join(c.dir, key))
			c.mu.Lock()
			switch {
			case err == nil:
				e.path = p
				if fi, serr := os.Stat(p + ".fmt"); serr == nil {
					e.size = fi.Size()
				}
				c.bytes += e.size
			case errors.Is(err, errFormatCanceled):
				e.canceled = true
				c.lru.Remove(e.elem)
				delete(c.entries, key)
				// Scratch space, as in evictLocked.
				_ = os.RemoveAll(filepath.Join(c.dir, key))
			}
			close(e.done)
			c.evictLocked()
			c.mu.Unlock()
		} else {
			select {
			case <-e.done:
			case <-stop:
				c.unpin(e)
				return "", func() {}
			}
		}
		if e.canceled && !building {
			c.unpin(e) // no longer in the cache: the next round builds it
			continue
		}
		var once sync.Once
		return e.path, func() { once.Do(func() { c.unpin(e) }) }
	}
}

// unpin releases one pin of e.
func (c *formatCache) unpin(e *fmtEntry) {
	c.mu.Lock()
	e.pins--
	c.evictLocked()
	c.mu.Unlock()
}

// evictLocked removes the least recently used unpinned formats while the
// cache is over a bound. Pinned formats stay even then: the bounds are
// exceeded at most by the formats loading at that moment.
func (c *formatCache) evictLocked() {
	for el := c.lru.Back(); el != nil && (c.lru.Len() > c.maxCount || c.bytes > c.maxBytes); {
		e := el.Value.(*fmtEntry)
		prev := el.Prev()
		if e.pins == 0 {
			c.lru.Remove(el)
			delete(c.entries, e.key)
			c.bytes -= e.size
			// Under the lock, so that a rebuild of the same key cannot
			// start before its old folder is gone.
			// A cached format is scratch space: a removal that fails
			// costs only disk.
			_ = os.RemoveAll(filepath.Join(c.dir, e.key))
		}
		el = prev
	}
}

// stats returns how many formats are kept and their bytes.
func (c *formatCache) stats() (count int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
