package office

import (
	"encoding/binary"
	"errors"
	"unicode/utf16"
)

// cfb reads what Detect needs of a Compound File Binary (the OLE2
// container of .doc, .xls, .ppt and of encrypted OOXML): the names of
// the root storage's streams and the first bytes of one of them. It is a
// reader of untrusted bytes: every chain it follows is bounded by the
// number of sectors the file has, and every offset is checked against the
// file's length.
type cfb struct {
	b           []byte
	shift       uint   // sector size = 1 << shift
	miniShift   uint   // mini sector size = 1 << miniShift
	miniCutoff  uint64 // streams below it live in the mini stream
	fat         []uint32
	miniFAT     []uint32
	dir         []cfbEntry
	miniStream  []byte // the root entry's stream, read on first use
	miniReadErr error
	miniRead    bool
}

type cfbEntry struct {
	name               string
	typ                byte // 1 storage, 2 stream, 5 root
	left, right, child uint32
	start              uint32
	size               uint64
}

const (
	cfbFree     = 0xFFFFFFFF
	cfbEnd      = 0xFFFFFFFE
	cfbNoStream = 0xFFFFFFFF
)

var errCFB = errors.New("damaged compound file")

// cfbMagic starts every Compound File Binary.
var cfbMagic = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}

func openCFB(b []byte) (*cfb, error) {
	if len(b) < 512 {
		return nil, errCFB
	}
	le := binary.LittleEndian
	c := &cfb{b: b}
	c.shift = uint(le.Uint16(b[0x1E:]))
	c.miniShift = uint(le.Uint16(b[0x20:]))
	if (c.shift != 9 && c.shift != 12) || c.miniShift != 6 {
		return nil, errCFB
	}
	c.miniCutoff = uint64(le.Uint32(b[0x38:]))
	nSectors := c.sectors()
	// The FAT: its sectors are listed by the header's 109 DIFAT entries,
	// then by a chain of DIFAT sectors.
	numFAT := le.Uint32(b[0x2C:])
	if uint64(numFAT) > uint64(nSectors) {
		return nil, errCFB
	}
	var fatSectors []uint32
	for i := 0; i < 109 && uint32(len(fatSectors)) < numFAT; i++ {
		fatSectors = append(fatSectors, le.Uint32(b[0x4C+4*i:]))
	}
	difat := le.Uint32(b[0x44:])
	perSector := (1 << c.shift) / 4
	for steps := 0; difat != cfbEnd && difat != cfbFree && uint32(len(fatSectors)) < numFAT; steps++ {
		s, ok := c.sector(difat)
		if !ok || steps > nSectors {
			return nil, errCFB
		}
		for i := 0; i < perSector-1 && uint32(len(fatSectors)) < numFAT; i++ {
			fatSectors = append(fatSectors, le.Uint32(s[4*i:]))
		}
		difat = le.Uint32(s[4*(perSector-1):])
	}
	for _, fs := range fatSectors {
		s, ok := c.sector(fs)
		if !ok {
			return nil, errCFB
		}
		for i := 0; i < perSector; i++ {
			c.fat = append(c.fat, le.Uint32(s[4*i:]))
		}
	}
	dirBytes, err := c.chain(le.Uint32(b[0x30:]), uint64(nSectors)<<c.shift)
	if err != nil {
		return nil, err
	}
	for off := 0; off+128 <= len(dirBytes); off += 128 {
		e := dirBytes[off : off+128]
		n := int(le.Uint16(e[0x40:]))
		if n > 64 {
			n = 64
		}
		u := make([]uint16, 0, 32)
		for i := 0; i+1 < n; i += 2 {
			u = append(u, le.Uint16(e[i:]))
		}
		for len(u) > 0 && u[len(u)-1] == 0 {
			u = u[:len(u)-1]
		}
		size := le.Uint64(e[0x78:])
		if c.shift == 9 {
			// Version 3 files keep garbage in the high half.
			size &= 0xFFFFFFFF
		}
		c.dir = append(c.dir, cfbEntry{
			name: string(utf16.Decode(u)), typ: e[0x42],
			left: le.Uint32(e[0x44:]), right: le.Uint32(e[0x48:]), child: le.Uint32(e[0x4C:]),
			start: le.Uint32(e[0x74:]), size: size,
		})
	}
	if len(c.dir) == 0 || c.dir[0].typ != 5 {
		return nil, errCFB
	}
	miniFAT, err := c.chain(le.Uint32(b[0x3C:]), uint64(le.Uint32(b[0x40:]))<<c.shift)
	if err == nil {
		for i := 0; i+4 <= len(miniFAT); i += 4 {
			c.miniFAT = append(c.miniFAT, le.Uint32(miniFAT[i:]))
		}
	}
	return c, nil
}

// sectors is how many whole sectors follow the header.
func (c *cfb) sectors() int { return len(c.b)>>c.shift - 1 }

func (c *cfb) sector(n uint32) ([]byte, bool) {
	if n >= uint32(c.sectors()) {
		return nil, false
	}
	off := (int(n) + 1) << c.shift
	return c.b[off : off+1<<c.shift], true
}

// chain reads the regular sectors from start on, at most max bytes.
func (c *cfb) chain(start uint32, max uint64) ([]byte, error) {
	var out []byte
	for n, steps := start, 0; n != cfbEnd && n != cfbFree && uint64(len(out)) < max; steps++ {
		s, ok := c.sector(n)
		if !ok || steps > c.sectors() || int(n) >= len(c.fat) {
			return nil, errCFB
		}
		out = append(out, s...)
		n = c.fat[n]
	}
	if uint64(len(out)) > max {
		out = out[:max]
	}
	return out, nil
}

// root returns the root storage's direct children by name.
func (c *cfb) root() map[string]cfbEntry {
	out := map[string]cfbEntry{}
	seen := map[uint32]bool{}
	var walk func(id uint32)
	walk = func(id uint32) {
		if id == cfbNoStream || int(id) >= len(c.dir) || seen[id] {
			return
		}
		seen[id] = true
		e := c.dir[id]
		out[e.name] = e
		walk(e.left)
		walk(e.right)
	}
	walk(c.dir[0].child)
	return out
}

// head returns up to n bytes from the start of stream e.
func (c *cfb) head(e cfbEntry, n uint64) ([]byte, error) {
	n = min(n, e.size)
	if e.size >= c.miniCutoff {
		return c.chain(e.start, n)
	}
	if !c.miniRead {
		c.miniRead = true
		c.miniStream, c.miniReadErr = c.chain(c.dir[0].start, c.dir[0].size)
	}
	if c.miniReadErr != nil {
		return nil, c.miniReadErr
	}
	var out []byte
	ms := uint64(1) << c.miniShift
	for s, steps := e.start, 0; s != cfbEnd && s != cfbFree && uint64(len(out)) < n; steps++ {
		off := uint64(s) << c.miniShift
		if off+ms > uint64(len(c.miniStream)) || int(s) >= len(c.miniFAT) || steps > len(c.miniFAT) {
			return nil, errCFB
		}
		out = append(out, c.miniStream[off:off+ms]...)
		s = c.miniFAT[s]
	}
	if uint64(len(out)) > n {
		out = out[:n]
	}
	return out, nil
}
