package tex

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"

	"golang.org/x/text/unicode/norm"
)

// Copies of installed fonts that TeX sees in place of the originals, for
// a right text layer.
//
// xdvipdfmx writes each embedded font's ToUnicode map in three steps: it
// inverts the font's cmap; it gives a glyph the cmap does not reach the
// code point of a glyph that a GSUB lookup makes it from, the first such
// lookup winning; and it reads the rest from glyph names (Adobe Glyph
// List rules). Noto Naskh Arabic maps the Arabic presentation forms
// (U+FB50–FDCF, U+FE70–FEFF) to the very glyphs its shaping picks, so
// copy and paste gave presentation forms instead of the letters of the
// source; where it draws two letters alike (ه and ە in final form) the
// first lookup named the rarer one; and the glyphs of its contextual
// lookups (lam-alef, the lam of Allah) are named after presentation forms
// or not at all, and came out wrong or missing.
//
// The copy keeps the original cmap under (3,1), the subtable HarfBuzz
// reads, so shaping is unchanged, and adds a text-layer cmap under (0,3),
// the one xdvipdfmx prefers: without the presentation forms and without
// the letters that lose a shared glyph to another (layerCmap). Every
// glyph that cmap does not reach gets a glyph name spelling the letters
// it is shaped from, traced through GSUB (glyphLetters, renamePost). The
// copy is renamed (the SIL Open Font License lets a modified font be
// shared under another name), and markdown's preamble loads it by file
// name through OSFONTDIR.

// textFont is one font copy: the installed file and the copy's names.
type textFont struct {
	source string // file name under a font folder
	copy   string // file name of the copy
	// rename is applied to every name record: the family and PostScript
	// names.
	rename [][2]string
}

// textFonts are the font copies TeX gets. The file names are the ones
// markdown's FontPreamble asks for.
var textFonts = []textFont{
	{"NotoNaskhArabic-Regular.ttf", "OutprintNaskhArabic-Regular.ttf", [][2]string{{"Noto Naskh Arabic", "Outprint Naskh Arabic"}, {"NotoNaskhArabic", "OutprintNaskhArabic"}}},
	{"NotoNaskhArabic-Bold.ttf", "OutprintNaskhArabic-Bold.ttf", [][2]string{{"Noto Naskh Arabic", "Outprint Naskh Arabic"}, {"NotoNaskhArabic", "OutprintNaskhArabic"}}},
}

// fontFolders are searched for textFonts' sources, in order.
var fontFolders = []string{"/usr/share/fonts", "/usr/local/share/fonts"}

// presentationForm reports whether a code point is left out of the text
// layer's cmap: an Arabic presentation form that stands for other letters
// (it has a compatibility decomposition), such as the letter forms and
// lam-alef ligatures that shaping produces. The word ligatures
// U+FDF0–FDFF stay: a writer types them as such, shaping does not make
// them from letters.
func presentationForm(r rune) bool {
	if !((r >= 0xFB50 && r <= 0xFDEF) || (r >= 0xFE70 && r <= 0xFEFF)) {
		return false
	}
	return norm.NFKC.String(string(r)) != string(r)
}

// textFontsVersion changes whenever the copies would come out differently
// from the same sources, so an old folder is not reused.
const textFontsVersion = "8"

// textFontsRoot is where the folders of font copies live: a cache that
// outlives every render and every Runner, so not the scratch folder
// (RunnerConfig.TempDir holds only what a Run or a Pool removes again).
// It is outprint/ in the user's cache folder ($XDG_CACHE_HOME or
// $HOME/.cache; the container's HOME is its writable data folder), else
// the system's temporary folder.
func textFontsRoot() string {
	if dir, err := os.UserCacheDir(); err == nil {
		root := filepath.Join(dir, "outprint")
		if os.MkdirAll(root, 0o755) == nil {
			return root
		}
	}
	return os.TempDir()
}

// prepareTextFonts writes the font copies into a folder under root named
// after a hash of their sources, unless it is already there, and returns
// the folder. Renders share it; each file is written under a temporary
// name and renamed, so a reader never sees half a font. A source that is
// not installed is left out: its script then fails in TeX as a missing
// font, as it would without the copy.
func prepareTextFonts(root string) (string, error) {
	type found struct {
		tf   textFont
		data []byte
	}
	var srcs []found
	h := sha256.New()
	h.Write([]byte(textFontsVersion))
	for _, tf := range textFonts {
		path := findFont(tf.source)
		if path == "" {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("font %s: %w", path, err)
		}
		srcs = append(srcs, found{tf, data})
		h.Write([]byte(tf.copy))
		h.Write(data)
	}
	dir := filepath.Join(root, "outprint-fonts-"+hex.EncodeToString(h.Sum(nil))[:16])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("font folder: %w", err)
	}
	for _, s := range srcs {
		dst := filepath.Join(dir, s.tf.copy)
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		out, err := textLayerCopy(s.data, s.tf.rename)
		if err != nil {
			return "", fmt.Errorf("font %s: %w", s.tf.source, err)
		}
		f, err := os.CreateTemp(dir, ".font-*")
		if err != nil {
			return "", fmt.Errorf("font folder: %w", err)
		}
		_, err = f.Write(out)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(f.Name(), 0o644)
		}
		if err == nil {
			err = os.Rename(f.Name(), dst)
		}
		if err != nil {
			_ = os.Remove(f.Name())
			return "", fmt.Errorf("font %s: %w", dst, err)
		}
	}
	return dir, nil
}

// FontEnv returns the environment entry that lets a TeX run started
// outside a Runner or Pool (a test that runs xelatex itself) find the font
// copies, which markdown's preamble loads by file name. It writes them
// where every Runner does.
func FontEnv() (string, error) {
	dir, err := prepareTextFonts(textFontsRoot())
	if err != nil {
		return "", err
	}
	return "OSFONTDIR=" + dir + ":", nil
}

// findFont returns the path of the first file called name under the font
// folders, "" if there is none.
func findFont(name string) string {
	for _, root := range fontFolders {
		var hit string
		// The callback passes over what it cannot read and stops at a
		// hit: the walk has no error to return.
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if !d.IsDir() && d.Name() == name {
				hit = path
				return fs.SkipAll
			}
			return nil
		})
		if hit != "" {
			return hit
		}
	}
	return ""
}

// sfntTable is one table of an OpenType file.
type sfntTable struct {
	tag  string
	data []byte
}

// readSfnt splits a TrueType or OpenType file (not a collection) into its
// tables.
func readSfnt(b []byte) (version uint32, tables []sfntTable, err error) {
	if len(b) < 12 {
		return 0, nil, errors.New("not an OpenType font: too short")
	}
	version = binary.BigEndian.Uint32(b)
	if version != 0x00010000 && version != 0x4F54544F { // TrueType, 'OTTO'
		return 0, nil, fmt.Errorf("not an OpenType font (version %#x)", version)
	}
	n := int(binary.BigEndian.Uint16(b[4:]))
	if len(b) < 12+16*n {
		return 0, nil, errors.New("table directory cut short")
	}
	for i := range n {
		rec := b[12+16*i:]
		off, length := binary.BigEndian.Uint32(rec[8:]), binary.BigEndian.Uint32(rec[12:])
		if uint64(off)+uint64(length) > uint64(len(b)) {
			return 0, nil, fmt.Errorf("table %q past the end of the file", rec[:4])
		}
		tables = append(tables, sfntTable{string(rec[:4]), b[off : off+length]})
	}
	return version, tables, nil
}

// writeSfnt joins tables into a font file, sorted by tag, each padded to
// four bytes, with the checksums and head's checkSumAdjustment OpenType
// asks for.
func writeSfnt(version uint32, tables []sfntTable) []byte {
	tables = slices.Clone(tables)
	slices.SortFunc(tables, func(a, b sfntTable) int { return strings.Compare(a.tag, b.tag) })
	n := len(tables)
	entrySelector := 0
	for 1<<(entrySelector+1) <= n {
		entrySelector++
	}
	searchRange := (1 << entrySelector) * 16
	out := binary.BigEndian.AppendUint32(nil, version)
	out = binary.BigEndian.AppendUint16(out, uint16(n))
	out = binary.BigEndian.AppendUint16(out, uint16(searchRange))
	out = binary.BigEndian.AppendUint16(out, uint16(entrySelector))
	out = binary.BigEndian.AppendUint16(out, uint16(n*16-searchRange))
	dirAt := len(out)
	out = append(out, make([]byte, 16*n)...)
	headAt := -1
	for i, t := range tables {
		data := t.data
		if t.tag == "head" && len(data) >= 12 {
			data = slices.Clone(data)
			binary.BigEndian.PutUint32(data[8:], 0)
			headAt = len(out)
		}
		rec := out[dirAt+16*i:]
		copy(rec, t.tag)
		binary.BigEndian.PutUint32(rec[4:], sfntChecksum(data))
		binary.BigEndian.PutUint32(rec[8:], uint32(len(out)))
		binary.BigEndian.PutUint32(rec[12:], uint32(len(data)))
		out = append(out, data...)
		for len(out)%4 != 0 {
			out = append(out, 0)
		}
	}
	if headAt >= 0 {
		binary.BigEndian.PutUint32(out[headAt+8:], 0xB1B0AFBA-sfntChecksum(out))
	}
	return out
}

// sfntChecksum is OpenType's table checksum: the sum of big-endian
// 32-bit words, the last one padded with zeros.
func sfntChecksum(b []byte) uint32 {
	var sum uint32
	for i := 0; i < len(b); i += 4 {
		var w [4]byte
		copy(w[:], b[i:])
		sum += binary.BigEndian.Uint32(w[:])
	}
	return sum
}

// textLayerCopy returns font with a text-layer cmap beside its own,
// glyph names that spell the letters of the glyphs that cmap does not
// reach, and its names renamed.
func textLayerCopy(font []byte, rename [][2]string) ([]byte, error) {
	version, tables, err := readSfnt(font)
	if err != nil {
		return nil, err
	}
	byTag := map[string]int{}
	for i, t := range tables {
		byTag[t.tag] = i
	}
	ci, ok := byTag["cmap"]
	if !ok {
		return nil, errors.New("no cmap table")
	}
	full, err := parseCmap(tables[ci].data)
	if err != nil {
		return nil, fmt.Errorf("cmap: %w", err)
	}
	var subst map[uint16][][]uint16
	if gi, ok := byTag["GSUB"]; ok {
		if subst, err = gsubSources(tables[gi].data); err != nil {
			return nil, fmt.Errorf("GSUB: %w", err)
		}
	}
	text, letters := textLetters(full, subst)
	layer := layerCmap(text, subst, letters)
	if tables[ci].data, err = buildCmap(full, layer); err != nil {
		return nil, fmt.Errorf("cmap: %w", err)
	}
	if pi, ok := byTag["post"]; ok {
		reached := map[uint16]bool{}
		for _, g := range layer {
			reached[g] = true
		}
		if tables[pi].data, err = renamePost(tables[pi].data, letters, reached); err != nil {
			return nil, fmt.Errorf("post: %w", err)
		}
	}
	if ni, ok := byTag["name"]; ok {
		if tables[ni].data, err = renameTable(tables[ni].data, rename); err != nil {
			return nil, fmt.Errorf("name: %w", err)
		}
	}
	return writeSfnt(version, tables), nil
}

// textLetters returns the font's cmap full less its presentation forms
// (the text a reader should get back), and the letters each glyph stands
// for. A glyph only a presentation form reaches (the spacing forms of
// the vowel marks, U+FE70–FE7F) stands for the letters it decomposes to.
func textLetters(full map[rune]uint16, subst map[uint16][][]uint16) (map[rune]uint16, map[uint16][]rune) {
	text := maps.Clone(full)
	maps.DeleteFunc(text, func(r rune, _ uint16) bool { return presentationForm(r) })
	letters := glyphLetters(text, subst)
	for r, g := range full {
		if presentationForm(r) && letters[g] == nil {
			letters[g] = []rune(norm.NFKC.String(string(r)))
		}
	}
	return text, letters
}

// layerCmap is the text layer's cmap: text less every Arabic letter that
// loses a glyph it shares with another letter. xdvipdfmx names a glyph
// made by GSUB after the first lookup that makes it from a glyph its cmap
// reaches; with the loser out of that cmap only the winner's lookups
// count, and the loser's own glyphs are named by renamePost.
func layerCmap(text map[rune]uint16, subst map[uint16][][]uint16, letters map[uint16][]rune) map[rune]uint16 {
	reached := map[uint16]bool{}
	for _, g := range text {
		reached[g] = true
	}
	losers := map[uint16]bool{}
	for out, ins := range subst {
		if reached[out] {
			continue
		}
		for _, in := range ins {
			if len(in) != 1 {
				continue
			}
			if l := letters[in[0]]; len(l) == 1 && !slices.Equal(l, letters[out]) {
				losers[in[0]] = true
			}
		}
	}
	layer := map[rune]uint16{}
	for r, g := range text {
		if !(losers[g] && unicode.Is(unicode.Arabic, r)) {
			layer[r] = g
		}
	}
	return layer
}

// parseCmap reads the font's Unicode mapping from its best subtable: a
// format 12 (full Unicode) one if there is one, else a format 4 (BMP) one.
func parseCmap(b []byte) (map[rune]uint16, error) {
	if len(b) < 4 {
		return nil, errors.New("too short")
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	if len(b) < 4+8*n {
		return nil, errors.New("encoding records cut short")
	}
	best, bestFormat := -1, uint16(0)
	for i := range n {
		rec := b[4+8*i:]
		platform, encoding := binary.BigEndian.Uint16(rec), binary.BigEndian.Uint16(rec[2:])
		off := int(binary.BigEndian.Uint32(rec[4:]))
		unicode := platform == 0 || (platform == 3 && (encoding == 1 || encoding == 10))
		if !unicode || off+2 > len(b) {
			continue
		}
		format := binary.BigEndian.Uint16(b[off:])
		if (format == 12 && bestFormat != 12) || (format == 4 && bestFormat == 0) {
			best, bestFormat = off, format
		}
	}
	switch bestFormat {
	case 4:
		return parseCmap4(b[best:])
	case 12:
		return parseCmap12(b[best:])
	}
	return nil, errors.New("no Unicode subtable of format 4 or 12")
}

func parseCmap4(b []byte) (map[rune]uint16, error) {
	if len(b) < 14 {
		return nil, errors.New("format 4 cut short")
	}
	segs := int(binary.BigEndian.Uint16(b[6:])) / 2
	if len(b) < 16+8*segs {
		return nil, errors.New("format 4 segments cut short")
	}
	ends, starts := b[14:], b[16+2*segs:]
	deltas, rangeOffs := b[16+4*segs:], b[16+6*segs:]
	m := map[rune]uint16{}
	for i := range segs {
		end := binary.BigEndian.Uint16(ends[2*i:])
		start := binary.BigEndian.Uint16(starts[2*i:])
		delta := binary.BigEndian.Uint16(deltas[2*i:])
		ro := int(binary.BigEndian.Uint16(rangeOffs[2*i:]))
		for c := int(start); c <= int(end) && c != 0xFFFF; c++ {
			var g uint16
			if ro == 0 {
				g = uint16(c) + delta
			} else {
				at := 16 + 6*segs + 2*i + ro + 2*(c-int(start))
				if at+2 > len(b) {
					return nil, errors.New("format 4 glyph index past the table")
				}
				if g = binary.BigEndian.Uint16(b[at:]); g != 0 {
					g += delta
				}
			}
			if g != 0 {
				m[rune(c)] = g
			}
		}
	}
	return m, nil
}

func parseCmap12(b []byte) (map[rune]uint16, error) {
	if len(b) < 16 {
		return nil, errors.New("format 12 cut short")
	}
	n := int(binary.BigEndian.Uint32(b[12:]))
	if n > (len(b)-16)/12 {
		return nil, errors.New("format 12 groups cut short")
	}
	m := map[rune]uint16{}
	for i := range n {
		g := b[16+12*i:]
		start, end, glyph := binary.BigEndian.Uint32(g), binary.BigEndian.Uint32(g[4:]), binary.BigEndian.Uint32(g[8:])
		if end < start || end > 0x10FFFF || end-start > 0x10FFFF {
			return nil, errors.New("format 12 group out of range")
		}
		for c := start; c <= end; c++ {
			if gl := glyph + (c - start); gl != 0 && gl <= 0xFFFF {
				m[rune(c)] = uint16(gl)
			}
		}
	}
	return m, nil
}

// buildCmap writes a cmap table with two format 4 subtables: full under
// (3,1), which HarfBuzz prefers, and layer under (0,3), which xdvipdfmx
// prefers. A font with code points past the BMP would need format 12
// subtables, which both prefer alike, so it is refused.
func buildCmap(full, layer map[rune]uint16) ([]byte, error) {
	for r := range full {
		if r >= 0xFFFF {
			return nil, fmt.Errorf("code point U+%04X past the BMP", r)
		}
	}
	layerSub, fullSub := cmapFormat4(layer), cmapFormat4(full)
	out := binary.BigEndian.AppendUint16(nil, 0)
	out = binary.BigEndian.AppendUint16(out, 2)
	// Encoding records sorted by platform, then encoding.
	out = binary.BigEndian.AppendUint16(out, 0)
	out = binary.BigEndian.AppendUint16(out, 3)
	out = binary.BigEndian.AppendUint32(out, 20)
	out = binary.BigEndian.AppendUint16(out, 3)
	out = binary.BigEndian.AppendUint16(out, 1)
	out = binary.BigEndian.AppendUint32(out, uint32(20+len(layerSub)))
	out = append(out, layerSub...)
	return append(out, fullSub...), nil
}

// cmapFormat4 writes m (BMP only) as a format 4 subtable: one segment per
// run of consecutive code points whose glyphs are consecutive too
// (idDelta), then the closing 0xFFFF.
func cmapFormat4(m map[rune]uint16) []byte {
	runes := slices.Sorted(maps.Keys(m))
	type seg struct{ start, end, delta uint16 }
	var segs []seg
	for _, r := range runes {
		c, g := uint16(r), m[r]
		if k := len(segs) - 1; k >= 0 && segs[k].end+1 == c && c+segs[k].delta == g {
			segs[k].end = c
			continue
		}
		segs = append(segs, seg{c, c, g - c})
	}
	segs = append(segs, seg{0xFFFF, 0xFFFF, 1})
	n := len(segs)
	entrySelector := 0
	for 1<<(entrySelector+1) <= n {
		entrySelector++
	}
	searchRange := 2 * (1 << entrySelector)
	f4 := binary.BigEndian.AppendUint16(nil, 4)
	f4 = binary.BigEndian.AppendUint16(f4, uint16(16+8*n))
	f4 = binary.BigEndian.AppendUint16(f4, 0) // language
	f4 = binary.BigEndian.AppendUint16(f4, uint16(2*n))
	f4 = binary.BigEndian.AppendUint16(f4, uint16(searchRange))
	f4 = binary.BigEndian.AppendUint16(f4, uint16(entrySelector))
	f4 = binary.BigEndian.AppendUint16(f4, uint16(2*n-searchRange))
	for _, s := range segs {
		f4 = binary.BigEndian.AppendUint16(f4, s.end)
	}
	f4 = binary.BigEndian.AppendUint16(f4, 0) // reservedPad
	for _, s := range segs {
		f4 = binary.BigEndian.AppendUint16(f4, s.start)
	}
	for _, s := range segs {
		f4 = binary.BigEndian.AppendUint16(f4, s.delta)
	}
	for range segs {
		f4 = binary.BigEndian.AppendUint16(f4, 0) // idRangeOffset
	}
	return f4
}

// renameTable rewrites a name table (format 0 or 1) with every pair of
// rename replaced in every record. Records of platform 1 (Macintosh) are
// taken as ASCII, the others as UTF-16BE. A format 1 table's language
// tags are dropped with the records that use them.
func renameTable(b []byte, rename [][2]string) ([]byte, error) {
	if len(b) < 6 {
		return nil, errors.New("too short")
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	storage := int(binary.BigEndian.Uint16(b[4:]))
	if len(b) < 6+12*n || storage > len(b) {
		return nil, errors.New("records cut short")
	}
	var recs, strs []byte
	for i := range n {
		rec := b[6+12*i : 6+12*i+12]
		lang := binary.BigEndian.Uint16(rec[4:])
		length, off := int(binary.BigEndian.Uint16(rec[8:])), int(binary.BigEndian.Uint16(rec[10:]))
		if lang >= 0x8000 {
			continue
		}
		if storage+off+length > len(b) {
			return nil, errors.New("string past the table")
		}
		s := b[storage+off : storage+off+length]
		if binary.BigEndian.Uint16(rec) == 1 {
			s = []byte(replaceAll(string(s), rename))
		} else if length%2 == 0 {
			u := make([]uint16, length/2)
			for j := range u {
				u[j] = binary.BigEndian.Uint16(s[2*j:])
			}
			u = utf16.Encode([]rune(replaceAll(string(utf16.Decode(u)), rename)))
			s = nil
			for _, w := range u {
				s = binary.BigEndian.AppendUint16(s, w)
			}
		}
		at := bytes.Index(strs, s)
		if at < 0 || len(s) == 0 {
			at = len(strs)
			strs = append(strs, s...)
		}
		if len(strs) > 0xFFFF {
			return nil, errors.New("names too long")
		}
		r := slices.Clone(rec)
		binary.BigEndian.PutUint16(r[8:], uint16(len(s)))
		binary.BigEndian.PutUint16(r[10:], uint16(at))
		recs = append(recs, r...)
	}
	count := len(recs) / 12
	out := binary.BigEndian.AppendUint16(nil, 0)
	out = binary.BigEndian.AppendUint16(out, uint16(count))
	out = binary.BigEndian.AppendUint16(out, uint16(6+12*count))
	out = append(out, recs...)
	return append(out, strs...), nil
}

func replaceAll(s string, rename [][2]string) string {
	for _, p := range rename {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	return s
}

// gsubSources reads the font's substitutions backwards: for each glyph
// that a single, multiple, alternate, ligature or reverse chaining
// substitution can produce, the glyph sequences it is made from (a ligature's components,
// one glyph for the others). Contextual lookups only call these, so they
// need no reading of their own.
func gsubSources(b []byte) (src map[uint16][][]uint16, err error) {
	if len(b) < 10 {
		return nil, errors.New("header cut short")
	}
	// gsubReader panics with errGSUBRead on an offset past the table.
	defer func() {
		if p := recover(); p != nil {
			if p != errGSUBRead {
				panic(p)
			}
			src, err = nil, errGSUBRead
		}
	}()
	src = map[uint16][][]uint16{}
	add := func(out uint16, in ...uint16) { src[out] = append(src[out], in) }
	var r gsubReader = b
	ll := r.u16(8)
	nl := r.u16(ll)
	for i := range nl {
		lk := ll + r.u16(ll+2+2*i)
		typ, nsub := r.u16(lk), r.u16(lk+4)
		for j := range nsub {
			st := lk + r.u16(lk+6+2*j)
			t := typ
			if t == 7 { // extension: the real subtable is further on
				t = r.u16(st + 2)
				st += int(r.u32(st + 4))
			}
			r.subtable(t, st, add)
		}
	}
	return src, nil
}

// gsubReader reads big-endian numbers from a GSUB table. A read past its
// end panics with errGSUBRead, which gsubSources recovers: the offsets
// nest deeply, and one check there beats one after every read.
type gsubReader []byte

var errGSUBRead = errors.New("read past the table")

func (r gsubReader) u16(at int) int {
	if at < 0 || at+2 > len(r) {
		panic(errGSUBRead)
	}
	return int(binary.BigEndian.Uint16(r[at:]))
}

func (r gsubReader) u32(at int) uint32 {
	if at < 0 || at+4 > len(r) {
		panic(errGSUBRead)
	}
	return binary.BigEndian.Uint32(r[at:])
}

// coverage lists the glyphs of the coverage table at at, in coverage
// index order.
func (r gsubReader) coverage(at int) []uint16 {
	var gs []uint16
	switch r.u16(at) {
	case 1:
		for i := range r.u16(at + 2) {
			gs = append(gs, uint16(r.u16(at+4+2*i)))
		}
	case 2:
		for i := range r.u16(at + 2) {
			rec := at + 4 + 6*i
			start, end := r.u16(rec), r.u16(rec+2)
			for g := start; g <= end; g++ {
				gs = append(gs, uint16(g))
			}
		}
	}
	return gs
}

// subtable reads one substitution subtable of lookup type t at st and
// calls add with each output glyph and the input glyphs it comes from.
// Contextual lookups (5, 6) only choose among the others' substitutions
// and add nothing of their own.
func (r gsubReader) subtable(t, st int, add func(out uint16, in ...uint16)) {
	switch t {
	case 1:
		r.single(st, add)
	case 2, 3: // multiple, alternate: each output glyph from its input
		r.multiple(st, add)
	case 4:
		r.ligature(st, add)
	case 8: // reverse chaining single substitution
		cov := r.coverage(st + r.u16(st+2))
		back := r.u16(st + 4)
		ahead := r.u16(st + 6 + 2*back)
		count := st + 8 + 2*back + 2*ahead
		for i, g := range cov {
			if i < r.u16(count) {
				add(uint16(r.u16(count+2+2*i)), g)
			}
		}
	}
}

// single reads a single substitution subtable (lookup type 1) in either
// of its formats: a delta added to each glyph, or a list of glyphs.
func (r gsubReader) single(st int, add func(out uint16, in ...uint16)) {
	cov := r.coverage(st + r.u16(st+2))
	switch r.u16(st) {
	case 1:
		delta := uint16(r.u16(st + 4))
		for _, g := range cov {
			add(g+delta, g)
		}
	case 2:
		for i, g := range cov {
			if i < r.u16(st+4) {
				add(uint16(r.u16(st+6+2*i)), g)
			}
		}
	}
}

// multiple reads a multiple or alternate substitution subtable (lookup
// types 2 and 3, of one layout): a sequence of glyphs per input glyph.
func (r gsubReader) multiple(st int, add func(out uint16, in ...uint16)) {
	cov := r.coverage(st + r.u16(st+2))
	for i, g := range cov {
		if i >= r.u16(st+4) {
			break
		}
		seq := st + r.u16(st+6+2*i)
		for k := range r.u16(seq) {
			add(uint16(r.u16(seq+2+2*k)), g)
		}
	}
}

// ligature reads a ligature substitution subtable (lookup type 4): per
// first glyph, a set of ligatures, each with the glyphs that follow.
func (r gsubReader) ligature(st int, add func(out uint16, in ...uint16)) {
	cov := r.coverage(st + r.u16(st+2))
	for i, first := range cov {
		if i >= r.u16(st+4) {
			break
		}
		set := st + r.u16(st+6+2*i)
		for k := range r.u16(set) {
			lig := set + r.u16(set+2+2*k)
			in := []uint16{first}
			for c := 1; c < r.u16(lig+2); c++ {
				in = append(in, uint16(r.u16(lig+4+2*(c-1))))
			}
			add(uint16(r.u16(lig)), in...)
		}
	}
}

// glyphLetters gives each glyph the letters it stands for: a glyph cmap
// reaches its lowest code point, any other glyph the letters it is shaped
// from, traced back through the substitutions. Glyphs it cannot trace are
// left out.
func glyphLetters(cmap map[rune]uint16, subst map[uint16][][]uint16) map[uint16][]rune {
	lt := letterTracer{
		direct:   map[uint16]rune{},
		subst:    subst,
		memo:     map[uint16][]rune{},
		visiting: map[uint16]bool{},
	}
	for r, g := range cmap {
		if old, ok := lt.direct[g]; !ok || r < old {
			lt.direct[g] = r
		}
	}
	out := map[uint16][]rune{}
	for g, r := range lt.direct {
		out[g] = []rune{r}
	}
	for g := range subst {
		if l := lt.trace(g); l != nil && out[g] == nil {
			out[g] = l
		}
	}
	return out
}

// letterTracer traces glyphs back through the substitutions to the
// letters cmap maps to them (direct), remembering what it found and
// which glyphs it is tracing (so that a cycle of substitutions ends).
type letterTracer struct {
	direct   map[uint16]rune
	subst    map[uint16][][]uint16
	memo     map[uint16][]rune
	visiting map[uint16]bool
}

// trace returns the letters glyph g stands for, nil when it cannot tell.
func (lt *letterTracer) trace(g uint16) []rune {
	if r, ok := lt.direct[g]; ok {
		return []rune{r}
	}
	if l, ok := lt.memo[g]; ok {
		return l
	}
	if lt.visiting[g] {
		return nil
	}
	lt.visiting[g] = true
	defer delete(lt.visiting, g)
	var best []rune
	for _, in := range lt.subst[g] {
		if l := lt.spell(in); l != nil && betterSpelling(l, best) {
			best = l
		}
	}
	lt.memo[g] = best
	return best
}

// spell returns the letters of the input glyphs in, nil when one of them
// cannot be traced.
func (lt *letterTracer) spell(in []uint16) []rune {
	var l []rune
	for _, c := range in {
		cl := lt.trace(c)
		if cl == nil {
			return nil
		}
		l = append(l, cl...)
	}
	return l
}

// betterSpelling reports whether l spells a glyph better than best (nil:
// none yet). The shortest spelling wins (a glyph made both from one
// letter and from a ligature of two is the letter), then the lowest code
// points: where the font draws two letters alike (ه and ە, ف and ڧ in
// some forms), the letter of the Arabic block comes before those of its
// extensions.
func betterSpelling(l, best []rune) bool {
	return best == nil || len(l) < len(best) || (len(l) == len(best) && slices.Compare(l, best) < 0)
}

// renamePost rewrites the glyph names of a version 2 post table so that
// each glyph of letters that the text layer's cmap does not reach gets a
// name the Adobe Glyph List reads as those
// letters: uni + their code points, then a period and the old name, which
// the list ignores and which keeps names unique. xdvipdfmx reads a glyph
// that neither the cmap nor its own GSUB tracing reaches by its name, and
// the shaped Arabic glyphs that contextual lookups choose (lam-alef, the
// lam of Allah) are named after presentation forms (uniFEDF.rlig) or not
// at all (_1008). Other versions of the table are left as they are.
func renamePost(b []byte, letters map[uint16][]rune, reached map[uint16]bool) ([]byte, error) {
	if len(b) < 34 || binary.BigEndian.Uint32(b) != 0x00020000 {
		return b, nil
	}
	n := int(binary.BigEndian.Uint16(b[32:]))
	if len(b) < 34+2*n {
		return nil, errors.New("glyph name indexes cut short")
	}
	names, err := postNames(b[34+2*n:])
	if err != nil {
		return nil, err
	}
	out := slices.Clone(b[:34+2*n])
	for g := range n {
		if reached[uint16(g)] {
			continue
		}
		old := fmt.Sprintf("g%d", g)
		if idx := int(binary.BigEndian.Uint16(out[34+2*g:])); idx >= 258 && idx-258 < len(names) {
			old = names[idx-258]
		}
		l, ok := letters[uint16(g)]
		if !ok {
			// A glyph GSUB does not lead to (a ligature with a dot
			// glyph, a variant no lookup picks) keeps the letters of
			// its name, presentation forms spelled out.
			l = nameLetters(old)
		}
		if name, ok := letterGlyphName(l, old); ok {
			binary.BigEndian.PutUint16(out[34+2*g:], uint16(258+len(names)))
			names = append(names, name)
		}
	}
	if len(names) > 0xFFFF-258 {
		return nil, errors.New("too many glyph names")
	}
	for _, name := range names {
		out = append(out, byte(len(name)))
		out = append(out, name...)
	}
	return out, nil
}

// postNames reads the Pascal strings of a post table's glyph names.
func postNames(b []byte) ([]string, error) {
	var names []string
	for at := 0; at < len(b); {
		l := int(b[at])
		if at+1+l > len(b) {
			return nil, errors.New("glyph name past the table")
		}
		names = append(names, string(b[at+1:at+1+l]))
		at += 1 + l
	}
	return names, nil
}

// letterGlyphName returns the glyph name that spells letters l (uni and
// their code points) with the glyph's old name after a period, or false
// when l is empty, has a letter beyond the BMP (or a surrogate), which
// uniXXXX cannot spell, or the name would exceed PostScript's 63
// characters.
func letterGlyphName(l []rune, old string) (string, bool) {
	if l == nil || slices.ContainsFunc(l, func(r rune) bool { return r > 0xFFFF || (r >= 0xD800 && r <= 0xDFFF) }) {
		return "", false
	}
	var name strings.Builder
	name.WriteString("uni")
	for _, r := range l {
		fmt.Fprintf(&name, "%04X", r)
	}
	name.WriteString("." + strings.ReplaceAll(old, ".", "_"))
	if name.Len() > 63 {
		return "", false
	}
	return name.String(), true
}

// nameLetters reads a glyph name of uniXXXX components (Adobe Glyph List
// style, joined by "_", a suffix after a period) and returns its letters
// with presentation forms replaced by the letters they stand for; nil if
// the name has no such form or is not of that style.
func nameLetters(name string) []rune {
	base, _, _ := strings.Cut(name, ".")
	var out []rune
	changed := false
	for part := range strings.SplitSeq(base, "_") {
		hexs, ok := strings.CutPrefix(part, "uni")
		if !ok || len(hexs) == 0 || len(hexs)%4 != 0 {
			return nil
		}
		for i := 0; i < len(hexs); i += 4 {
			v, err := strconv.ParseUint(hexs[i:i+4], 16, 16)
			if err != nil || strings.ToUpper(hexs[i:i+4]) != hexs[i:i+4] {
				return nil
			}
			r := rune(v)
			if presentationForm(r) {
				out = append(out, []rune(norm.NFKC.String(string(r)))...)
				changed = true
			} else {
				out = append(out, r)
			}
		}
	}
	if !changed {
		return nil
	}
	return out
}
