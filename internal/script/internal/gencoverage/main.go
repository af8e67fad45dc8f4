// Command gencoverage writes fontcoverage_gen.go for package script: a
// table of which installed fonts have a glyph for which code points, read
// from the fonts' own cmap tables.
//
// The script package must decide, for every rune of a document, which font
// can draw it, because XeTeX silently drops a character the current font
// lacks (it only logs "Missing character"). Asking the fonts at run time
// would tie the pure-Go script package to the font files, so the answer is
// computed once, here, and committed. Run it through `go generate
// ./internal/script` after the font packages change; the test of this
// package fails when the committed table no longer matches the installed
// fonts.
//
// A family's coverage is the intersection of the faces fontspec will use for
// it (regular, bold, italic, bold italic where they exist), so a character
// that is assigned to a family can be set in any of its styles.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/image/font/sfnt"
)

// Family is one font family of the fallback chain: its key in package
// script, the name fontspec loads it by, and the files of its faces.
// In a collection file (.ttc) the face whose family is Name is read.
type Family struct {
	Const string   // Go constant for its bit
	Key   string   // font key of script.Run ("" is the main font)
	Name  string   // family name as fontconfig and fontspec know it
	Files []string // face files (base names) whose coverage is intersected
}

// Families lists the fonts in bit order. The order is part of the generated
// file only; the fallback order lives in package script.
var Families = []Family{
	// The main font is Noto Serif, but the same runs are set in Noto Sans
	// in headings and in Noto Sans Mono in code, so a character counts as
	// covered only when all three have it.
	{"covMain", "", "Noto Serif", []string{
		"NotoSerif-Regular.ttf", "NotoSerif-Bold.ttf", "NotoSerif-Italic.ttf", "NotoSerif-BoldItalic.ttf",
		"NotoSans-Regular.ttf", "NotoSans-Bold.ttf", "NotoSans-Italic.ttf", "NotoSans-BoldItalic.ttf",
		"NotoSansMono-Regular.ttf", "NotoSansMono-Bold.ttf",
	}},
	{"covCJK", "cjk", "Noto Serif CJK JP", []string{"NotoSerifCJK-Regular.ttc", "NotoSerifCJK-Bold.ttc"}},
	{"covArabic", "arabic", "Noto Naskh Arabic", []string{"NotoNaskhArabic-Regular.ttf", "NotoNaskhArabic-Bold.ttf"}},
	// Hebrew, Devanagari and Thai have serif and sans faces: the serif in
	// text, the sans in headings; a character counts when both have it.
	{"covHebrew", "hebrew", "Noto Serif Hebrew", []string{"NotoSerifHebrew-Regular.ttf", "NotoSerifHebrew-Bold.ttf", "NotoSansHebrew-Regular.ttf", "NotoSansHebrew-Bold.ttf"}},
	{"covDevanagari", "devanagari", "Noto Serif Devanagari", []string{"NotoSerifDevanagari-Regular.ttf", "NotoSerifDevanagari-Bold.ttf", "NotoSansDevanagari-Regular.ttf", "NotoSansDevanagari-Bold.ttf"}},
	{"covThai", "thai", "Noto Serif Thai", []string{"NotoSerifThai-Regular.ttf", "NotoSerifThai-Bold.ttf", "NotoSansThai-Regular.ttf", "NotoSansThai-Bold.ttf"}},
	{"covMath", "math", "Noto Sans Math", []string{"NotoSansMath-Regular.ttf"}},
	{"covSymbols", "symbols", "Noto Sans Symbols", []string{"NotoSansSymbols-Regular.ttf", "NotoSansSymbols-Bold.ttf"}},
	{"covSymbolsTwo", "symbolstwo", "Noto Sans Symbols2", []string{"NotoSansSymbols2-Regular.ttf"}},
	// The other scripts Debian's Noto fonts cover, serif where a serif exists.
	{"covBengali", "bengali", "Noto Serif Bengali", []string{"NotoSerifBengali-Regular.ttf", "NotoSerifBengali-Bold.ttf"}},
	{"covTamil", "tamil", "Noto Serif Tamil", []string{"NotoSerifTamil-Regular.ttf", "NotoSerifTamil-Bold.ttf"}},
	{"covMalayalam", "malayalam", "Noto Serif Malayalam", []string{"NotoSerifMalayalam-Regular.ttf", "NotoSerifMalayalam-Bold.ttf"}},
	{"covKannada", "kannada", "Noto Serif Kannada", []string{"NotoSerifKannada-Regular.ttf", "NotoSerifKannada-Bold.ttf"}},
	{"covTelugu", "telugu", "Noto Serif Telugu", []string{"NotoSerifTelugu-Regular.ttf", "NotoSerifTelugu-Bold.ttf"}},
	{"covGujarati", "gujarati", "Noto Serif Gujarati", []string{"NotoSerifGujarati-Regular.ttf", "NotoSerifGujarati-Bold.ttf"}},
	{"covGurmukhi", "gurmukhi", "Noto Serif Gurmukhi", []string{"NotoSerifGurmukhi-Regular.ttf", "NotoSerifGurmukhi-Bold.ttf"}},
	{"covOriya", "oriya", "Noto Sans Oriya", []string{"NotoSansOriya-Regular.ttf", "NotoSansOriya-Bold.ttf"}},
	{"covSinhala", "sinhala", "Noto Serif Sinhala", []string{"NotoSerifSinhala-Regular.ttf", "NotoSerifSinhala-Bold.ttf"}},
	{"covKhmer", "khmer", "Noto Serif Khmer", []string{"NotoSerifKhmer-Regular.ttf", "NotoSerifKhmer-Bold.ttf"}},
	{"covLao", "lao", "Noto Serif Lao", []string{"NotoSerifLao-Regular.ttf", "NotoSerifLao-Bold.ttf"}},
	{"covMyanmar", "myanmar", "Noto Serif Myanmar", []string{"NotoSerifMyanmar-Regular.ttf", "NotoSerifMyanmar-Bold.ttf"}},
	{"covTibetan", "tibetan", "Noto Serif Tibetan", []string{"NotoSerifTibetan-Regular.ttf", "NotoSerifTibetan-Bold.ttf"}},
	{"covGeorgian", "georgian", "Noto Serif Georgian", []string{"NotoSerifGeorgian-Regular.ttf", "NotoSerifGeorgian-Bold.ttf"}},
	{"covArmenian", "armenian", "Noto Serif Armenian", []string{"NotoSerifArmenian-Regular.ttf", "NotoSerifArmenian-Bold.ttf"}},
	{"covEthiopic", "ethiopic", "Noto Serif Ethiopic", []string{"NotoSerifEthiopic-Regular.ttf", "NotoSerifEthiopic-Bold.ttf"}},
	{"covEmoji", "emoji", "Symbola", []string{"Symbola_hint.ttf"}},
}

const maxRune = 0x10FFFF

func main() {
	fontDir := flag.String("fonts", "/usr/share/fonts", "folder searched (recursively) for the font files")
	out := flag.String("o", "fontcoverage_gen.go", "output file")
	flag.Parse()
	src, err := Generate(*fontDir)
	if err != nil {
		log.Fatalf("gencoverage: %v", err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatalf("gencoverage: %v", err)
	}
}

// Generate reads the fonts below fontDir and returns the formatted Go source
// of fontcoverage_gen.go.
func Generate(fontDir string) ([]byte, error) {
	paths, err := findFiles(fontDir)
	if err != nil {
		return nil, err
	}
	var cover [][]bool // per family, indexed by rune
	var versions []string
	for _, fam := range Families {
		set, version, err := familyCoverage(fam, paths)
		if err != nil {
			return nil, fmt.Errorf("family %s: %w", fam.Name, err)
		}
		cover = append(cover, set)
		versions = append(versions, fmt.Sprintf("%s (%s): %s", fam.Name, strings.Join(fam.Files, ", "), version))
	}

	var b bytes.Buffer
	b.WriteString("// Code generated by internal/gencoverage from the installed fonts' cmap tables; DO NOT EDIT.\n\n")
	b.WriteString("package script\n\n")
	b.WriteString("// The table was read from these fonts (family (faces): version):\n")
	for _, v := range versions {
		fmt.Fprintf(&b, "//   - %s\n", v)
	}
	b.WriteString("\n// fontSet is a set of the font families below, one bit each.\ntype fontSet uint32\n\n")
	b.WriteString("// The font families whose coverage fontCoverage records.\nconst (\n")
	for i, fam := range Families {
		if i == 0 {
			fmt.Fprintf(&b, "\t%s fontSet = 1 << iota // %s\n", fam.Const, fam.Name)
		} else {
			fmt.Fprintf(&b, "\t%s // %s\n", fam.Const, fam.Name)
		}
	}
	b.WriteString(")\n\n")
	b.WriteString("// coverageRange says that every rune from lo to hi (inclusive) has a glyph\n// in exactly the fonts of set.\ntype coverageRange struct {\n\tlo, hi rune\n\tset    fontSet\n}\n\n")
	b.WriteString("// fontCoverage lists, in rune order, the ranges covered by at least one\n// font; a rune in no range has no glyph in any of them.\nvar fontCoverage = [...]coverageRange{\n")
	for r := rune(0); r <= maxRune; {
		set := setOf(cover, r)
		lo := r
		for r++; r <= maxRune && setOf(cover, r) == set; r++ {
		}
		if set != 0 {
			fmt.Fprintf(&b, "\t{0x%04X, 0x%04X, 0x%03X},\n", lo, r-1, set)
		}
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format generated source: %w", err)
	}
	return src, nil
}

func setOf(cover [][]bool, r rune) uint32 {
	var set uint32
	for i, c := range cover {
		if c[r] {
			set |= 1 << i
		}
	}
	return set
}

// findFiles maps the base name of every file below dir to its path. The
// first one found in lexical order wins, so the result is deterministic.
func findFiles(dir string) (map[string]string, error) {
	paths := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			if _, ok := paths[d.Name()]; !ok {
				paths[d.Name()] = path
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("search fonts in %s: %w", dir, err)
	}
	return paths, nil
}

// familyCoverage returns which runes every face of fam maps to a glyph, and
// the version string of its first face.
func familyCoverage(fam Family, paths map[string]string) ([]bool, string, error) {
	var set []bool
	var version string
	for _, file := range fam.Files {
		path, ok := paths[file]
		if !ok {
			return nil, "", fmt.Errorf("font file %s is not installed", file)
		}
		f, err := openFace(path, fam.Name)
		if err != nil {
			return nil, "", err
		}
		var buf sfnt.Buffer
		if version == "" {
			// Only the version number: the rest of the string names the
			// hinting tool's options, which change nothing here.
			version, _ = f.Name(&buf, sfnt.NameIDVersion)
			version, _, _ = strings.Cut(version, ";")
		}
		face := make([]bool, maxRune+1)
		for r := rune(0); r <= maxRune; r++ {
			g, err := f.GlyphIndex(&buf, r)
			face[r] = err == nil && g != 0
		}
		if set == nil {
			set = face
			continue
		}
		for r := range set {
			set[r] = set[r] && face[r]
		}
	}
	return set, version, nil
}

// openFace parses path and returns its face; in a collection (Noto CJK
// holds one face per region) the face of the family name.
func openFace(path, family string) (*sfnt.Font, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := sfnt.ParseCollection(data)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if c.NumFonts() == 1 {
		return c.Font(0)
	}
	var names []string
	for i := 0; i < c.NumFonts(); i++ {
		f, err := c.Font(i)
		if err != nil {
			return nil, fmt.Errorf("parse %s face %d: %w", path, i, err)
		}
		var buf sfnt.Buffer
		name, err := f.Name(&buf, sfnt.NameIDFamily)
		if err != nil && !errors.Is(err, sfnt.ErrNotFound) {
			return nil, fmt.Errorf("read name of %s face %d: %w", path, i, err)
		}
		if name == family {
			return f, nil
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("%s has no face of family %q (it has %s)", path, family, strings.Join(names, ", "))
}
