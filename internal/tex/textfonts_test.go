package tex

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/image/font/sfnt"

	"github.com/outprint/outprint/internal/testenv"
)

// TestTextFontCopies: the Arabic font copy keeps the original cmap for
// shaping (3,1), has a text-layer cmap (0,3) with every letter of the
// Arabic alphabet on its glyph and no presentation form, names the glyphs
// shaping makes after their letters, carries its own name, and is a font
// another parser reads.
func TestTextFontCopies(t *testing.T) {
	src := findFont("NotoNaskhArabic-Regular.ttf")
	if src == "" {
		testenv.Missing(t, "Noto Naskh Arabic is not installed (run scripts/setup.sh: fonts-noto-core)")
	}
	dir, err := prepareTextFonts(t.TempDir())
	if err != nil {
		t.Fatalf("prepareTextFonts: %v", err)
	}
	orig, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile(filepath.Join(dir, "OutprintNaskhArabic-Regular.ttf"))
	if err != nil {
		t.Fatalf("copy not written: %v", err)
	}
	before := tableOf(t, orig, "cmap")
	after := tableOf(t, copied, "cmap")
	origMap, err := cmapSubtable(before, 3, 1)
	if err != nil || origMap == nil {
		t.Fatalf("original (3,1) cmap: %v", err)
	}
	shaping, err := cmapSubtable(after, 3, 1)
	if err != nil || shaping == nil {
		t.Fatalf("copy's (3,1) cmap: %v", err)
	}
	layer, err := cmapSubtable(after, 0, 3)
	if err != nil || layer == nil {
		t.Fatalf("copy's (0,3) cmap: %v", err)
	}
	if len(shaping) != len(origMap) {
		t.Errorf("copy's (3,1) cmap has %d code points, want the original's %d", len(shaping), len(origMap))
	}
	dropped := 0
	for r, g := range origMap {
		if shaping[r] != g {
			t.Errorf("copy's (3,1) cmap maps U+%04X to glyph %d, want %d", r, shaping[r], g)
		}
		if presentationForm(r) {
			dropped++
			if _, ok := layer[r]; ok {
				t.Errorf("copy's (0,3) cmap maps the presentation form U+%04X", r)
			}
		}
	}
	if dropped < 100 {
		t.Errorf("the original maps %d presentation forms, want the font under test to have them", dropped)
	}
	for r := rune(0x0621); r <= 0x064A; r++ {
		if g, ok := origMap[r]; ok && layer[r] != g {
			t.Errorf("copy's (0,3) cmap maps %c U+%04X to glyph %d, want %d", r, r, layer[r], g)
		}
	}
	// ە (U+06D5) shares its final glyph with ه: it leaves the text
	// layer's cmap so the shared glyph reads as ه.
	if _, ok := layer[0x06D5]; ok {
		t.Errorf("copy's (0,3) cmap still maps U+06D5, which shares ه's final glyph")
	}

	f, err := sfnt.Parse(copied)
	if err != nil {
		t.Fatalf("sfnt.Parse(copy): %v", err)
	}
	var buf sfnt.Buffer
	for _, id := range []sfnt.NameID{sfnt.NameIDFamily, sfnt.NameIDPostScript} {
		name, err := f.Name(&buf, id)
		if err != nil {
			t.Fatalf("name %d: %v", id, err)
		}
		if !strings.Contains(name, "Outprint") || strings.Contains(name, "Noto") {
			t.Errorf("copy's name %d = %q, want it renamed to Outprint", id, name)
		}
	}
	// Glyph names: the final ه (uniFEEA in the original) spells ه, and
	// no glyph outside the text layer's cmap keeps a name with a
	// presentation form in it.
	reached := map[uint16]bool{}
	for _, g := range layer {
		reached[g] = true
	}
	names := map[string]bool{}
	for g := range f.NumGlyphs() {
		name, err := f.GlyphName(&buf, sfnt.GlyphIndex(g))
		if err != nil {
			t.Fatalf("glyph name %d: %v", g, err)
		}
		names[name] = true
		if !reached[uint16(g)] && nameLetters(name) != nil {
			t.Errorf("glyph %d is still named %q", g, name)
		}
	}
	if !names["uni0647.uniFEEA"] {
		t.Errorf("no glyph named uni0647.uniFEEA (the final ه)")
	}
	// A second call finds the folder ready.
	again, err := prepareTextFonts(filepath.Dir(dir))
	if err != nil || again != dir {
		t.Errorf("prepareTextFonts again = %q, %v; want %q", again, err, dir)
	}
}

// tableOf returns one table of a font file.
func tableOf(t *testing.T, font []byte, tag string) []byte {
	t.Helper()
	_, tables, err := readSfnt(font)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.tag == tag {
			return tb.data
		}
	}
	t.Fatalf("no %s table", tag)
	return nil
}

// TestWriteSfntChecksums: the whole file sums to OpenType's magic number
// once head's checkSumAdjustment is set, and each table's record carries
// its checksum.
func TestWriteSfntChecksums(t *testing.T) {
	head := make([]byte, 54)
	copy(head[12:], []byte{0x5F, 0x0F, 0x3C, 0xF5})
	out := writeSfnt(0x00010000, []sfntTable{{"name", []byte("abcde")}, {"head", head}, {"cmap", []byte{0, 0, 0, 0}}})
	if got := sfntChecksum(out); got != 0xB1B0AFBA {
		t.Errorf("file checksum = %#x, want 0xB1B0AFBA", got)
	}
	_, tables, err := readSfnt(out)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for i, tb := range tables {
		tags = append(tags, tb.tag)
		rec := out[12+16*i:]
		want := sfntChecksum(tb.data)
		if tb.tag == "head" {
			want = sfntChecksum(head)
		}
		if got := binary.BigEndian.Uint32(rec[4:]); got != want {
			t.Errorf("table %s checksum = %#x, want %#x", tb.tag, got, want)
		}
	}
	if got := strings.Join(tags, " "); got != "cmap head name" {
		t.Errorf("tables = %q, want sorted cmap head name", got)
	}
}

// cmapSubtable reads the subtable of a cmap table for one platform and
// encoding, nil if there is none (or it is neither format 4 nor 12).
func cmapSubtable(b []byte, platform, encoding uint16) (map[rune]uint16, error) {
	if len(b) < 4 {
		return nil, errors.New("too short")
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	for i := range n {
		if 4+8*i+8 > len(b) {
			break
		}
		rec := b[4+8*i:]
		off := int(binary.BigEndian.Uint32(rec[4:]))
		if binary.BigEndian.Uint16(rec) != platform || binary.BigEndian.Uint16(rec[2:]) != encoding || off+2 > len(b) {
			continue
		}
		switch binary.BigEndian.Uint16(b[off:]) {
		case 4:
			return parseCmap4(b[off:])
		case 12:
			return parseCmap12(b[off:])
		}
	}
	return nil, nil
}
