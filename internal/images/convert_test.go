package images

import (
	"bytes"
	"context"
	"encoding/binary"
	"image"
	_ "image/gif"
	_ "image/jpeg"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	_ "golang.org/x/image/webp"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// pdfPageSize asks pdfinfo for the page size in points.
func pdfPageSize(t *testing.T, path string) (w, h float64) {
	t.Helper()
	out, err := exec.Command("pdfinfo", path).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo %s: %v\n%s", path, err, out)
	}
	m := regexp.MustCompile(`Page size:\s+([0-9.]+) x ([0-9.]+) pts`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("pdfinfo %s: no page size in\n%s", path, out)
	}
	w, _ = strconv.ParseFloat(string(m[1]), 64)
	h, _ = strconv.ParseFloat(string(m[2]), 64)
	if !bytes.Contains(out, []byte("Pages:           1\n")) {
		t.Errorf("pdfinfo %s: want 1 page:\n%s", path, out)
	}
	return w, h
}

// pdfText runs pdftotext.
func pdfText(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("pdftotext", path, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext %s: %v", path, err)
	}
	return string(out)
}

var canonicalName = regexp.MustCompile(`^img-[0-9]{2}\.(png|jpg|pdf)$`)

// TestConvert converts the good images and checks each output with tools
// that are not ours: pdfinfo and pdftotext for PDFs, Go's decoders for
// raster images.
func TestConvert(t *testing.T) {
	testenv.Require(t, "rsvg-convert", "pdfinfo", "pdftotext")
	type want struct {
		ext  string
		w, h float64
		same bool   // canonical bytes are the source bytes
		text string // for PDFs: text that must be in it
	}
	cases := []struct {
		dir  string
		imgs map[string]want
	}{{"testdata/good", map[string]want{
		"tiny.png":    {"png", 40, 20, true, ""},
		"tiny.jpg":    {"jpg", 64, 48, true, ""},
		"anim.gif":    {"png", 30, 20, false, ""},
		"tiny.webp":   {"png", 150, 100, false, ""},
		"diagram.svg": {"pdf", 240, 90, false, "Worker"},
	}}}
	if shared := testenv.SharedDir(t, moduleRoot); shared != "" {
		cases = append(cases, struct {
			dir  string
			imgs map[string]want
		}{filepath.Join(shared, "corpus", "images"), map[string]want{
			"architecture.svg": {"pdf", 480, 270, false, "Notifications"},
			"chart.png":        {"png", 1200, 600, true, ""},
			"photo.jpg":        {"jpg", 1600, 1067, true, ""},
		}})
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.dir), func(t *testing.T) {
			var refs []Ref
			for name := range c.imgs {
				refs = append(refs, Ref{URL: name, Line: len(refs) + 1})
			}
			set, err := Load(context.Background(), refs, Dir(c.dir))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			got, err := set.Convert(context.Background(), dir, nil)
			if err != nil {
				t.Fatalf("Convert = %v", err)
			}
			if len(got) != len(c.imgs) {
				t.Errorf("Convert = %d images, want %d", len(got), len(c.imgs))
			}
			files := map[string]bool{}
			for url, w := range c.imgs {
				cn, ok := got[url]
				if !ok {
					t.Errorf("Convert: no canonical image for %q", url)
					continue
				}
				if !canonicalName.MatchString(cn.File) || !strings.HasSuffix(cn.File, "."+w.ext) || files[cn.File] {
					t.Errorf("Convert(%s).File = %q, want a new img-NN.%s", url, cn.File, w.ext)
				}
				files[cn.File] = true
				if math.Abs(cn.Width-w.w) > 0.01 || math.Abs(cn.Height-w.h) > 0.01 {
					t.Errorf("Convert(%s) = %g×%g, want %g×%g", url, cn.Width, cn.Height, w.w, w.h)
				}
				path := filepath.Join(dir, cn.File)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if w.same {
					src, _ := os.ReadFile(filepath.Join(c.dir, url))
					if !bytes.Equal(data, src) {
						t.Errorf("Convert(%s): %s differs from the source, want a copy", url, cn.File)
					}
				}
				switch w.ext {
				case "pdf":
					pw, ph := pdfPageSize(t, path)
					if math.Abs(pw-w.w) > 0.5 || math.Abs(ph-w.h) > 0.5 {
						t.Errorf("pdfinfo(%s of %s) = %g×%g pt, want %g×%g", cn.File, url, pw, ph, w.w, w.h)
					}
					if txt := pdfText(t, path); !strings.Contains(txt, w.text) {
						t.Errorf("pdftotext(%s of %s) = %q, want %q in it", cn.File, url, txt, w.text)
					}
				default:
					m, format, err := image.Decode(bytes.NewReader(data))
					if err != nil || format != map[string]string{"png": "png", "jpg": "jpeg"}[w.ext] {
						t.Errorf("image.Decode(%s of %s) = %s, %v, want %s", cn.File, url, format, err, w.ext)
						continue
					}
					if b := m.Bounds(); float64(b.Dx()) != w.w || float64(b.Dy()) != w.h {
						t.Errorf("image.Decode(%s of %s) = %v, want %g×%g", cn.File, url, b, w.w, w.h)
					}
				}
			}
		})
	}
}

// TestConvertGIFFirstFrame: the first frame, drawn at its offset on the
// logical screen, is what the PNG shows.
func TestConvertGIFFirstFrame(t *testing.T) {
	set, err := Load(context.Background(), []Ref{{"anim.gif", 1}}, Dir("testdata/good"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	got, err := set.Convert(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, got["anim.gif"].File))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	m, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// The first frame is red at (5,5)-(25,15); outside it the canvas is
	// transparent.
	for _, p := range []struct {
		x, y     int
		red, tra bool
	}{{10, 10, true, false}, {24, 14, true, false}, {2, 2, false, true}, {28, 18, false, true}} {
		r, g, b, a := m.At(p.x, p.y).RGBA()
		isRed := r > 0xC000 && g < 0x1000 && b < 0x1000 && a == 0xFFFF
		if isRed != p.red || (a == 0) != p.tra {
			t.Errorf("pixel (%d,%d) = %x %x %x %x, want red %v, transparent %v", p.x, p.y, r, g, b, a, p.red, p.tra)
		}
	}
}

// damagedPNG is tiny.png with its zlib stream cut in half but every chunk
// checksum recomputed: the chunk structure is whole, so Load (which never
// inflates) accepts it, and only the full decode of Convert can tell.
func damagedPNG(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile("testdata/good/tiny.png")
	if err != nil {
		t.Fatal(err)
	}
	var idat []byte
	for p := src[8:]; len(p) >= 12; {
		n := binary.BigEndian.Uint32(p)
		if string(p[4:8]) == "IDAT" {
			idat = append(idat, p[8:8+n]...)
		}
		p = p[12+n:]
	}
	if len(idat) < 4 {
		t.Fatal("tiny.png has no IDAT")
	}
	return pngFile(40, 20, 0, idat[:len(idat)/2])
}

// TestConvertBroken: images whose damage only a full decode finds are
// listed, each with its line, in one 422.
func TestConvertBroken(t *testing.T) {
	testenv.Require(t, "rsvg-convert")
	jpg, err := os.ReadFile("testdata/good/tiny.jpg")
	if err != nil {
		t.Fatal(err)
	}
	// A JPEG whose scan is cut short but which still ends with FF D9.
	var cut []byte
	sos := bytes.Index(jpg, []byte{0xFF, 0xDA})
	cut = append(cut, jpg[:sos+40]...)
	cut = append(cut, 0xFF, 0xD9)
	assets := Assets{
		"damaged.png": damagedPNG(t),
		"cut.jpg":     cut,
		"ok.png":      mustRead(t, "testdata/good/tiny.png"),
		"zero.svg":    []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0"/>`),
	}
	refs := []Ref{{"ok.png", 1}, {"damaged.png", 4}, {"cut.jpg", 6}, {"zero.svg", 8}}
	set, err := Load(context.Background(), refs, assets)
	if err != nil {
		t.Fatalf("Load = %v, want the damage to pass the header checks", err)
	}
	got, err := set.Convert(context.Background(), t.TempDir(), nil)
	if got != nil {
		t.Errorf("Convert = %v, want no images", got)
	}
	le := limitsError(t, err, limits.KindDocument)
	want := []struct {
		line int
		msg  string
	}{{4, "damaged.png: truncated or damaged PNG"}, {6, "cut.jpg: truncated, damaged or unsupported JPEG"}, {8, "zero.svg: the SVG cannot be drawn"}}
	if len(le.Problems) != len(want) {
		t.Fatalf("Convert = %v, want %d problems", le, len(want))
	}
	for i, w := range want {
		if p := le.Problems[i]; p.Line != w.line || !strings.HasPrefix(p.Message, w.msg) {
			t.Errorf("problem %d = %+v, want line %d, message %q…", i, p, w.line, w.msg)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
