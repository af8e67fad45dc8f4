package diagram

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// cacheKey identifies a drawing: the SHA-256 of the kind, the renderer's
// version and the source. The drawing depends on nothing else (the page,
// the fonts and the options are fixed for a build), so a cached PDF is the
// PDF a new drawing would make, but for its creation date.
type cacheKey [sha256.Size]byte

func key(dg Diagram) cacheKey {
	h := sha256.New()
	h.Write([]byte(dg.Kind))
	h.Write([]byte{0})
	if dg.Kind == Mermaid {
		h.Write([]byte(MermaidVersion))
	}
	h.Write([]byte{0})
	h.Write([]byte(dg.Source))
	var k cacheKey
	h.Sum(k[:0])
	return k
}

// cache keeps the drawings of diagrams drawn before in memory, bounded in
// bytes, least recently used out first: an exported wiki page printed
// again costs a hash per diagram instead of a browser's page. Failed
// drawings are not kept. A nil *cache keeps nothing. Safe for concurrent
// use.
type cache struct {
	mu      sync.Mutex
	max     int64
	bytes   int64
	order   *list.List // of *cacheEntry, most recently used first
	entries map[cacheKey]*list.Element
}

type cacheEntry struct {
	key cacheKey
	dr  Drawing
}

func newCache(maxBytes int64) *cache {
	return &cache{max: maxBytes, order: list.New(), entries: map[cacheKey]*list.Element{}}
}

func (c *cache) get(k cacheKey) (Drawing, bool) {
	if c == nil {
		return Drawing{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		return Drawing{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).dr, true
}

func (c *cache) put(k cacheKey, dr Drawing) {
	if c == nil || int64(len(dr.PDF)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[k]; ok {
		return
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{key: k, dr: dr})
	c.bytes += int64(len(dr.PDF))
	for c.bytes > c.max {
		el := c.order.Back()
		e := el.Value.(*cacheEntry)
		c.order.Remove(el)
		delete(c.entries, e.key)
		c.bytes -= int64(len(e.dr.PDF))
	}
}
