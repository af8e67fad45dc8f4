package images

import (
	"bytes"
	"context"
	"image"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// progressiveJPEG makes a real progressive JPEG with jpegtran: a uniform
// grey picture of side×side pixels (DC scan, AC first scan, AC refinement
// scan), then the refinement scan repeated extra times. A uniform picture
// has no AC coefficients, so each refinement scan is a few bytes of
// end-of-band runs, yet a decoder still walks every block for each one:
// issue 10's "small file, thousands of scans".
func progressiveJPEG(t testing.TB, side, extra int) []byte {
	t.Helper()
	testenv.Require(t, "jpegtran")
	dir := t.TempDir()
	m := image.NewGray(image.Rect(0, 0, side, side))
	for i := range m.Pix {
		m.Pix[i] = 128
	}
	var base bytes.Buffer
	if err := jpeg.Encode(&base, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	in, script, out := filepath.Join(dir, "base.jpg"), filepath.Join(dir, "scans.txt"), filepath.Join(dir, "prog.jpg")
	if err := os.WriteFile(in, base.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("0: 0 0 0 0;\n0: 1 63 0 1;\n0: 1 63 1 0;\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("jpegtran", "-scans", script, "-outfile", out, in).CombinedOutput(); err != nil {
		t.Fatalf("jpegtran: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	last := bytes.LastIndex(data, []byte{0xFF, 0xDA})
	end := bytes.LastIndex(data, []byte{0xFF, 0xD9})
	var b bytes.Buffer
	b.Write(data[:end])
	for range extra {
		b.Write(data[last:end])
	}
	b.Write(data[end:])
	return b.Bytes()
}

// TestJPEGScanLimit: a progressive JPEG with more than MaxJPEGScans scans
// is refused when it is loaded (before anything decodes it), naming the
// count; an ordinary progressive JPEG of three scans, and one right at the
// limit, pass and decode.
func TestJPEGScanLimit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		extra   int
		refused bool
	}{
		{0, false},
		{MaxJPEGScans - 3, false},
		{MaxJPEGScans - 2, true},
		{1500, true},
	}
	for _, tc := range cases {
		data := progressiveJPEG(t, 256, tc.extra)
		_, err := Load(context.Background(), []Ref{{URL: "p.jpg", Line: 3}}, Assets{"p.jpg": data})
		scans := 3 + tc.extra
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "scans")):
			t.Errorf("Load(%d scans) = %v, want a problem naming the scans", scans, err)
		case !tc.refused && err != nil:
			t.Errorf("Load(%d scans) = %v, want nil", scans, err)
		case !tc.refused:
			if _, err := jpeg.Decode(bytes.NewReader(data)); err != nil {
				t.Errorf("jpeg.Decode(%d scans) = %v: the test image is not a valid JPEG", scans, err)
			}
		}
	}
}
