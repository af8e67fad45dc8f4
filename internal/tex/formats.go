package tex

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
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

// formatCache is the Pool's formats, least recently used first out. A
// format is pinned while a process loads it (acquire until release), so it
// is never deleted under a starting TeX; once loaded, TeX needs the file
// no more.
type formatCache struct {
	dir      string
	maxCount int
	maxBytes int64
	// build dumps head into dir/key and returns the format's path without
	// ".fmt" (Pool.buildFormat).
	build func(key, head string) (string, error)

	mu      sync.Mutex
	entries map[string]*fmtEntry
	lru     list.List // of *fmtEntry, most recently used at the front
	bytes   int64
}

type fmtEntry struct {
	key  string
	path string // "" when the build failed: processes start without
	size int64
	pins int
	done chan struct{} // closed when the build ended
	elem *list.Element
}

func newFormatCache(dir string, maxCount int, maxBytes int64, build func(key, head string) (string, error)) *formatCache {
	if maxCount <= 0 {
		maxCount = DefaultMaxFormats
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFormatBytes
	}
	return &formatCache{dir: dir, maxCount: maxCount, maxBytes: maxBytes, build: build, entries: map[string]*fmtEntry{}}
}

// acquire returns the path (without ".fmt") of the format of head,
// building it on first use, and pins it until release is called. The path
// is "" when the build failed; a failed build is remembered like a format
// (and evicted like one), so a broken preamble is not dumped again on
// every warm-up.
func (c *formatCache) acquire(head string) (path string, release func()) {
	sum := sha256.Sum256([]byte(head))
	key := hex.EncodeToString(sum[:8])
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
		p, err := c.build(key, head)
		c.mu.Lock()
		if err == nil {
			e.path = p
			if fi, serr := os.Stat(p + ".fmt"); serr == nil {
				e.size = fi.Size()
			}
			c.bytes += e.size
		}
		close(e.done)
		c.evictLocked()
		c.mu.Unlock()
	} else {
		<-e.done
	}
	var once sync.Once
	return e.path, func() {
		once.Do(func() {
			c.mu.Lock()
			e.pins--
			c.evictLocked()
			c.mu.Unlock()
		})
	}
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
