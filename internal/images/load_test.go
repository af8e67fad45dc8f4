package images

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// moduleRoot is the module's root relative to this package.
const moduleRoot = "../.."

// imageRef finds ![alt](url ...) in a line of Markdown; enough for the test
// documents, which keep one image per line.
var imageRef = regexp.MustCompile(`!\[[^\]]*\]\(([^)\s]+)`)

// refsOf reads the image references of a Markdown file with their lines.
func refsOf(t *testing.T, path string) []Ref {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var refs []Ref
	s := bufio.NewScanner(f)
	for line := 1; s.Scan(); line++ {
		for _, m := range imageRef.FindAllStringSubmatch(s.Text(), -1) {
			refs = append(refs, Ref{URL: m[1], Line: line})
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return refs
}

// limitsError asserts that err is a *limits.Error of kind.
func limitsError(t *testing.T, err error, kind limits.Kind) *limits.Error {
	t.Helper()
	var le *limits.Error
	if !errors.As(err, &le) {
		t.Fatalf("error = %v (%T), want *limits.Error", err, err)
	}
	if le.Kind != kind {
		t.Fatalf("kind = %q, want %q (%v)", le.Kind, kind, le)
	}
	return le
}

// hostileWant is what each hostile image of images.md must be refused with.
var hostileWant = map[string]string{
	"bomb.png":               "bomb.png: 10000000000 pixels, at most 40000000 (100000×100000 by its header)",
	"../../../../etc/passwd": "not allowed: images must be files inside the document's folder",
	"truncated.png":          "truncated PNG",
	"not-an-image.png":       "not a supported image",
	"xxe.svg":                "declares XML entities",
	"laughs.svg":             "declares XML entities",
	"huge.svg":               "at most 2097152",
	"http://169.254.169.254/latest/meta-data/iam/security-credentials/": "not allowed: remote images",
	"http://127.0.0.1:22/": "not allowed: remote images",
	"outside.svg":          `refers to an outside resource ("file:///etc/hostname")`,
	"file:///etc/hostname": "not allowed: file: URLs are not fetched",
	"missing.png":          "missing.png: not found",
}

// hostileDir returns the testdata hostile folder copied into a temp folder
// together with a generated 2.4 MB SVG (too big to keep in testdata).
func hostileDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "testdata/hostile"
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "huge.svg"), hugeSVG(2_400_000), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hugeSVG is a well-formed SVG of exactly n bytes (n ≥ 80).
func hugeSVG(n int) []byte {
	const rect, end = `<rect x="1" y="1" width="1" height="1"/>`, `</svg>`
	var b bytes.Buffer
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100">`)
	for b.Len()+len(rect)+len(end) <= n {
		b.WriteString(rect)
	}
	b.WriteString(strings.Repeat(" ", n-b.Len()-len(end)))
	b.WriteString(end)
	return b.Bytes()
}

// TestLoadHostile loads every hostile image of images.md (the testdata copy
// and, when present, the shared corpus) and expects one 422 error with one
// problem per distinct image, in document order, each with its line.
func TestLoadHostile(t *testing.T) {
	dirs := map[string]string{"testdata": hostileDir(t)}
	if shared := testenv.SharedDir(t, moduleRoot); shared != "" {
		dirs["shared"] = filepath.Join(shared, "corpus", "hostile")
	}
	for name, dir := range dirs {
		t.Run(name, func(t *testing.T) {
			refs := refsOf(t, filepath.Join(dir, "images.md"))
			set, err := Load(context.Background(), refs, Chain(Dir(dir), nil))
			if set != nil {
				t.Errorf("Load(images.md) returned a set of %d images, want none", set.Len())
			}
			le := limitsError(t, err, limits.KindDocument)
			var want []Ref // first reference of each distinct URL
			seen := map[string]bool{}
			for _, r := range refs {
				if !seen[r.URL] {
					seen[r.URL] = true
					want = append(want, r)
				}
			}
			if len(le.Problems) != len(want) {
				t.Errorf("Load(images.md) = %d problems, want %d:\n%v", len(le.Problems), len(want), le)
			}
			for i, r := range want {
				if i >= len(le.Problems) {
					break
				}
				p := le.Problems[i]
				if p.Line != r.Line || p.Field != r.URL || p.Source != limits.SourceImage || p.Code != limits.CodeImage {
					t.Errorf("problem %d = %+v, want line %d, field %q, source image, code image", i, p, r.Line, r.URL)
				}
				w, ok := hostileWant[r.URL]
				if !ok {
					t.Errorf("no expectation for %q", r.URL)
					continue
				}
				if !strings.HasPrefix(p.Message, r.URL+": ") || !strings.Contains(p.Message, w) {
					t.Errorf("problem for %s: message %q, want it to start with the URL and contain %q", r.URL, p.Message, w)
				}
			}
		})
	}
}

// TestLoadGood loads the good images and checks format, header size and
// Bytes.
func TestLoadGood(t *testing.T) {
	type want struct {
		format format
		w, h   int
	}
	cases := []struct {
		dir  string
		imgs map[string]want
	}{
		{"testdata/good", map[string]want{
			"tiny.png":    {formatPNG, 40, 20},
			"tiny.jpg":    {formatJPEG, 64, 48},
			"anim.gif":    {formatGIF, 30, 20},
			"tiny.webp":   {formatWebP, 150, 100},
			"diagram.svg": {formatSVG, 320, 120},
		}},
	}
	if shared := testenv.SharedDir(t, moduleRoot); shared != "" {
		cases = append(cases, struct {
			dir  string
			imgs map[string]want
		}{filepath.Join(shared, "corpus", "images"), map[string]want{
			"architecture.svg": {formatSVG, 640, 360},
			"chart.png":        {formatPNG, 1200, 600},
			"photo.jpg":        {formatJPEG, 1600, 1067},
		}})
	}
	for _, c := range cases {
		var refs []Ref
		var total int64
		for name := range c.imgs {
			refs = append(refs, Ref{URL: name, Line: len(refs) + 1})
			st, err := os.Stat(filepath.Join(c.dir, name))
			if err != nil {
				t.Fatal(err)
			}
			total += st.Size()
		}
		set, err := Load(context.Background(), refs, Dir(c.dir))
		if err != nil {
			t.Fatalf("Load(%s) = %v, want no error", c.dir, err)
		}
		if set.Len() != len(refs) || set.Bytes() != total {
			t.Errorf("Load(%s) = %d images, %d bytes, want %d, %d", c.dir, set.Len(), set.Bytes(), len(refs), total)
		}
		for _, im := range set.images {
			w := c.imgs[im.url]
			if im.format != w.format || im.width != w.w || im.height != w.h {
				t.Errorf("Load(%s) = %s %d×%d, want %s %d×%d", im.url, im.format, im.width, im.height, w.format, w.w, w.h)
			}
		}
	}
}

// pngFile builds a PNG from raw chunks with correct checksums; idat is the
// content of one IDAT chunk (not necessarily a valid zlib stream: Load
// never inflates it).
func pngFile(w, h uint32, colorType byte, idat []byte) []byte {
	var b bytes.Buffer
	b.Write(pngMagic)
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		body := append([]byte(typ), data...)
		b.Write(body)
		_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(body))
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, colorType
	chunk("IHDR", ihdr)
	chunk("IDAT", idat)
	chunk("IEND", nil)
	return b.Bytes()
}

// noisePNG is an uncompressed RGBA PNG of side×side random pixels: about
// 4·side² bytes that no compression could shrink.
func noisePNG(t *testing.T, side int) []byte {
	t.Helper()
	m := image.NewNRGBA(image.Rect(0, 0, side, side))
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(m.Pix)
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestLoadLimits checks each bound of SPEC §3 at and just over its value.
func TestLoadLimits(t *testing.T) {
	tiny, err := os.ReadFile("testdata/good/tiny.png")
	if err != nil {
		t.Fatal(err)
	}
	manyAssets := func(n int) (Assets, []Ref) {
		a := Assets{}
		var refs []Ref
		for i := range n {
			name := fmt.Sprintf("img/%d.png", i)
			a[name] = tiny
			refs = append(refs, Ref{URL: name, Line: 10 + i})
		}
		return a, refs
	}
	a50, refs50 := manyAssets(50)
	a51, refs51 := manyAssets(51)

	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// 11 MiB: the size is refused before the content is looked at.
	write("big.png", append(bytes.Clone(pngMagic), make([]byte, 11<<20)...))
	// Exactly 10 MiB of a valid PNG: 1618×1618 RGBA uncompressed is just
	// under; the limit is on the bytes, so pad a valid PNG with bytes after
	// IEND, which decoders ignore.
	exact := noisePNG(t, 1618)
	write("exact.png", append(exact, make([]byte, limits.MaxImageBytes-len(exact))...))
	// Six images of about 9.4 MiB each: 56 MiB together.
	noise := noisePNG(t, 1536)
	var totalRefs []Ref
	for i := range 6 {
		name := fmt.Sprintf("noise-%d.png", i)
		write(name, noise)
		totalRefs = append(totalRefs, Ref{URL: name, Line: 3 + i})
	}
	write("px-40m.png", pngFile(8000, 5000, 0, []byte{1, 2, 3}))
	write("px-40m1.png", pngFile(40_000_001, 1, 0, []byte{1, 2, 3}))
	write("svg-40m1.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="40000001" height="1"/>`))
	write("svg-40m.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 8000 5000"/>`))
	write("svg-2m.svg", hugeSVG(limits.MaxSVGBytes))
	write("svg-2m1.svg", hugeSVG(limits.MaxSVGBytes+1))

	tests := []struct {
		name string
		src  Source
		refs []Ref
		want string // "" for success, else one problem containing this
		line int
	}{
		{"50 images", a50, refs50, "", 0},
		{"51 images", a51, refs51, "the document references 51 images, at most 50", 60},
		{"51 references of 50 images", a50, append(refs50, refs50[7]), "", 0},
		{"10 MiB", Dir(dir), []Ref{{"exact.png", 4}}, "", 0},
		{"11 MiB", Dir(dir), []Ref{{"big.png", 4}}, "big.png: larger than 10485760 bytes", 4},
		{"56 MiB together", Dir(dir), totalRefs, "noise-5.png: the images together exceed 52428800 bytes", 8},
		{"40M pixels", Dir(dir), []Ref{{"px-40m.png", 2}}, "", 0},
		{"40M+1 pixels", Dir(dir), []Ref{{"px-40m1.png", 2}}, "px-40m1.png: 40000001 pixels, at most 40000000 (40000001×1 by its header)", 2},
		{"SVG 40M pixels", Dir(dir), []Ref{{"svg-40m.svg", 2}}, "", 0},
		{"SVG 40M+1 pixels", Dir(dir), []Ref{{"svg-40m1.svg", 2}}, "40000001 pixels", 2},
		{"SVG 2 MiB", Dir(dir), []Ref{{"svg-2m.svg", 5}}, "", 0},
		{"SVG 2 MiB+", Dir(dir), []Ref{{"svg-2m1.svg", 5}}, "at most 2097152 (2 MiB)", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Load(context.Background(), tt.refs, tt.src)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Load = %v, want no error", err)
				}
				if set == nil || set.Len() == 0 {
					t.Fatalf("Load = empty set, want images")
				}
				return
			}
			le := limitsError(t, err, limits.KindDocument)
			if len(le.Problems) != 1 || !strings.Contains(le.Problems[0].Message, tt.want) || le.Problems[0].Line != tt.line {
				t.Errorf("Load = %v, want one problem %q on line %d", le.Problems, tt.want, tt.line)
			}
		})
	}
}

// countingSource counts the calls per URL of the source it wraps.
type countingSource struct {
	src   Source
	calls map[string]*atomic.Int32
}

func (c countingSource) Open(ctx context.Context, url string) ([]byte, error) {
	c.calls[url].Add(1)
	return c.src.Open(ctx, url)
}

// TestLoadOncePerURL: an image used twice is fetched once and is one image.
func TestLoadOncePerURL(t *testing.T) {
	src := countingSource{src: Dir("testdata/good"), calls: map[string]*atomic.Int32{
		"tiny.png": new(atomic.Int32), "tiny.jpg": new(atomic.Int32),
	}}
	refs := []Ref{{"tiny.png", 1}, {"tiny.jpg", 2}, {"tiny.png", 3}, {"tiny.png", 9}}
	set, err := Load(context.Background(), refs, src)
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != 2 {
		t.Errorf("Load(%v).Len() = %d, want 2", refs, set.Len())
	}
	for url, n := range src.calls {
		if n.Load() != 1 {
			t.Errorf("Open(%q) called %d times, want 1", url, n.Load())
		}
	}
}

// sourceFunc adapts a function to Source; it stands in for remote fetchers
// (package fetch, Outline), outside systems this package does not run.
type sourceFunc func(ctx context.Context, url string) ([]byte, error)

func (f sourceFunc) Open(ctx context.Context, url string) ([]byte, error) { return f(ctx, url) }

// TestLoadSourceErrors: the sentinels become image problems with our own
// text; anything else is internal and no *limits.Error.
func TestLoadSourceErrors(t *testing.T) {
	secret := "dial tcp 10.1.2.3:443: connection refused"
	tests := []struct {
		name     string
		err      error
		want     string // problem text; "" for an internal error
		internal error  // for internal errors, what errors.Is must find
	}{
		{"not found", fmt.Errorf("%w: 404 from %s", ErrNotFound, secret), "a.png: not found", nil},
		{"not allowed", fmt.Errorf("%w: %s", ErrNotAllowed, secret), "a.png: not allowed", nil},
		{"unavailable", fmt.Errorf("%w: %s", ErrUnavailable, secret), "a.png: could not be fetched", nil},
		{"bug", errors.New(secret), "", nil},
		{"cancelled", context.Canceled, "", context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := sourceFunc(func(context.Context, string) ([]byte, error) { return nil, tt.err })
			_, err := Load(context.Background(), []Ref{{"a.png", 3}}, src)
			var le *limits.Error
			if tt.want == "" {
				if err == nil || errors.As(err, &le) {
					t.Fatalf("Load = %v, want an internal error", err)
				}
				if tt.internal != nil && !errors.Is(err, tt.internal) {
					t.Errorf("Load = %v, want it to wrap %v", err, tt.internal)
				}
				return
			}
			le = limitsError(t, err, limits.KindDocument)
			if len(le.Problems) != 1 || !strings.Contains(le.Problems[0].Message, tt.want) || le.Problems[0].Line != 3 {
				t.Errorf("Load = %v, want one problem %q on line 3", le.Problems, tt.want)
			}
			if strings.Contains(le.Error(), "10.1.2.3") {
				t.Errorf("Load = %v: the source's error text reached the client message", le)
			}
		})
	}
}

// TestLoadCancelled: a cancelled ctx is internal, not an image problem.
func TestLoadCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Load(ctx, []Ref{{"tiny.png", 1}, {"tiny.jpg", 2}}, Dir("testdata/good"))
	var le *limits.Error
	if !errors.Is(err, context.Canceled) || errors.As(err, &le) {
		t.Errorf("Load(cancelled) = %v, want a wrapped context.Canceled", err)
	}
}

// TestLoadNil: no refs is an empty set; refs with a nil source are not found.
func TestLoadNil(t *testing.T) {
	set, err := Load(context.Background(), nil, nil)
	if err != nil || set.Len() != 0 || set.Bytes() != 0 {
		t.Errorf("Load(nil) = %v, %v, want an empty set", set, err)
	}
	_, err = Load(context.Background(), []Ref{{"a.png", 2}, {"", 4}}, nil)
	le := limitsError(t, err, limits.KindDocument)
	if len(le.Problems) != 2 || le.Problems[0].Message != "a.png: not found" ||
		le.Problems[1].Message != "an image without URL: not found" || le.Problems[1].Field != "images" {
		t.Errorf("Load(nil source) = %+v, want two not found problems", le.Problems)
	}
}
