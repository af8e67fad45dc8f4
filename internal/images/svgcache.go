package images

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// SVGCache keeps the PDFs that SVGs were converted to, keyed by the
// SHA-256 of the SVG as it was handed to rsvg-convert, so that an SVG seen
// again (the same wiki page exported again, a diagram many documents
// share) costs a hash instead of a converter process: some 40 ms of a
// render's latency and CPU on this machine. rsvg-convert's output depends
// only on its input (it runs with an empty environment and no files), so
// a cached PDF is the PDF a conversion would make. Failed conversions are
// not kept: they are rare and their error depends on the limits of the
// moment. The cache is bounded in bytes and forgets the least recently
// used PDFs first. It is safe for concurrent use; a nil *SVGCache keeps
// nothing.
type SVGCache struct {
	mu      sync.Mutex
	max     int64
	bytes   int64
	order   *list.List // of *svgEntry, most recently used first
	entries map[[sha256.Size]byte]*list.Element
}

type svgEntry struct {
	key  [sha256.Size]byte
	pdf  []byte
	w, h float64
}

// NewSVGCache returns a cache that holds up to maxBytes of PDF.
func NewSVGCache(maxBytes int64) *SVGCache {
	return &SVGCache{max: maxBytes, order: list.New(), entries: map[[sha256.Size]byte]*list.Element{}}
}

func (c *SVGCache) get(key [sha256.Size]byte) (pdf []byte, w, h float64, ok bool) {
	if c == nil {
		return nil, 0, 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil, 0, 0, false
	}
	c.order.MoveToFront(el)
	e := el.Value.(*svgEntry)
	return e.pdf, e.w, e.h, true
}

func (c *SVGCache) put(key [sha256.Size]byte, pdf []byte, w, h float64) {
	if c == nil || int64(len(pdf)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; ok {
		return
	}
	c.entries[key] = c.order.PushFront(&svgEntry{key: key, pdf: pdf, w: w, h: h})
	c.bytes += int64(len(pdf))
	for c.bytes > c.max {
		el := c.order.Back()
		e := el.Value.(*svgEntry)
		c.order.Remove(el)
		delete(c.entries, e.key)
		c.bytes -= int64(len(e.pdf))
	}
}

// Len returns how many PDFs the cache holds.
func (c *SVGCache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
