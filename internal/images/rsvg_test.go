package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// slowSVG passes Load (36 million pixels) and keeps rsvg-convert busy for
// many seconds: a turbulence filter over the whole canvas.
const slowSVG = `<svg xmlns="http://www.w3.org/2000/svg" width="6000" height="6000">
<filter id="t" x="0" y="0" width="1" height="1"><feTurbulence baseFrequency="0.01" numOctaves="10"/><feGaussianBlur stdDeviation="50"/></filter>
<rect width="6000" height="6000" filter="url(#t)"/>
</svg>`

// floodSVG needs a 6000×6000 filter surface (144 MB) at once.
const floodSVG = `<svg xmlns="http://www.w3.org/2000/svg" width="6000" height="6000">
<filter id="f" x="0" y="0" width="1" height="1"><feFlood flood-color="red"/></filter>
<rect width="6000" height="6000" filter="url(#f)"/>
</svg>`

// converterChildren lists the pids of rsvg-convert processes whose parent
// is this test process.
func converterChildren(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	me := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split at ")".
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.Contains(s[:i], "(rsvg-convert") {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(me) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// noConverterLeft fails when an rsvg-convert child or its process group
// survived.
func noConverterLeft(t *testing.T, pgid int) {
	t.Helper()
	if left := converterChildren(t); len(left) > 0 {
		t.Errorf("rsvg-convert processes left: %v", left)
	}
	if pgid > 0 {
		if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kill(-%d, 0) = %v, want ESRCH: the process group lives on", pgid, err)
		}
	}
}

// TestSVGReadsNoFile calls the conversion helper directly, as if an SVG had
// slipped past Load, with every way an SVG names a file, and checks with
// pdftotext and pdfimages that nothing of the file reached the PDF. The
// files are /etc/hostname and, because a host name may be too short to
// search for, a text file with a unique marker and a PNG image in a
// temporary folder: an image that were loaded would show in pdfimages.
func TestSVGReadsNoFile(t *testing.T) {
	testenv.Require(t, "rsvg-convert", "pdftotext", "pdfimages")
	dir := t.TempDir()
	marker := fmt.Sprintf("SECRET%dX%d", os.Getpid(), time.Now().UnixNano())
	text := filepath.Join(dir, "secret.txt")
	img := filepath.Join(dir, "secret.png")
	if err := os.WriteFile(text, []byte(marker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, mustRead(t, "testdata/good/tiny.png"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostname, _ := os.ReadFile("/etc/hostname")
	host := strings.TrimSpace(string(hostname))
	r := strings.NewReplacer("TEXT", text, "IMG", img)
	tests := []struct{ name, svg string }{
		{"image href", svgOpen + `<text x="5" y="20">MARKER</text>
			<image href="file:///etc/hostname" width="50" height="50"/>
			<image href="file://IMG" width="50" height="50"/>
			<image xlink:href="IMG" width="50" height="50"/>
			<image href="../../../../../../..IMG" width="50" height="50"/>
			<image href="secret.png" width="50" height="50"/></svg>`},
		{"xinclude", svgOpen + `<text x="5" y="20">MARKER <xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="TEXT" parse="text"/></text>
			<text x="5" y="40"><xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="file:///etc/hostname" parse="text"/></text>
			<text x="5" y="60"><xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="file://TEXT" parse="text"/></text></svg>`},
		{"external entity", `<?xml version="1.0"?><!DOCTYPE svg [ <!ENTITY s SYSTEM "file://TEXT"> <!ENTITY h SYSTEM "file:///etc/hostname"> ]>` +
			svgOpen + `<text x="5" y="20">MARKER &s; &h;</text></svg>`},
		{"css", svgOpen + `<style>@import url("TEXT"); rect { fill: url(file://IMG) }</style><rect width="9" height="9" style="fill: url(IMG)"/><text x="5" y="20">MARKER</text></svg>`},
		{"use", svgOpen + `<use href="IMG#x"/><use href="file:///etc/hostname#x"/><text x="5" y="20">MARKER</text></svg>`},
		{"feImage", svgOpen + `<filter id="f"><feImage href="file://IMG"/></filter><rect width="50" height="50" filter="url(#f)"/><text x="5" y="20">MARKER</text></svg>`},
	}
	sb := defaultSandbox()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pdf, err := sb.svgToPDF(context.Background(), t.TempDir(), []byte(r.Replace(tt.svg)))
			var ce *convError
			if errors.As(err, &ce) && !ce.resource {
				// Refusing the SVG is as good as ignoring the reference, as
				// long as the message does not carry the file either.
				if strings.Contains(ce.msg, marker) {
					t.Errorf("svgToPDF = %q: the error carries the secret file", ce.msg)
				}
				t.Logf("refused: %s", ce.msg)
				return
			}
			if err != nil {
				t.Fatalf("svgToPDF = %v", err)
			}
			path := filepath.Join(t.TempDir(), "out.pdf")
			if err := os.WriteFile(path, pdf, 0o644); err != nil {
				t.Fatal(err)
			}
			txt := pdfText(t, path)
			if !strings.Contains(txt, "MARKER") {
				t.Errorf("pdftotext = %q, want MARKER (the drawing itself)", txt)
			}
			if strings.Contains(txt, marker) {
				t.Errorf("pdftotext = %q: it holds the secret file", txt)
			}
			for _, w := range strings.Fields(txt) {
				if host != "" && w == host {
					t.Errorf("pdftotext = %q: it holds /etc/hostname (%q)", txt, host)
				}
			}
			out, err := exec.Command("pdfimages", "-list", path).Output()
			if err != nil {
				t.Fatal(err)
			}
			if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) > 2 {
				t.Errorf("pdfimages -list = %s, want no image", out)
			}
		})
	}
}

// TestSVGCancel: rsvg-convert runs bounded and at childproc.Nice;
// cancelling ctx kills it and its process group, and the error is internal
// (the client did not do anything wrong).
func TestSVGCancel(t *testing.T) {
	testenv.Require(t, "rsvg-convert")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		pdf []byte
		err error
	}
	done := make(chan result, 1)
	scratch := t.TempDir()
	go func() {
		pdf, err := defaultSandbox().svgToPDF(ctx, scratch, []byte(slowSVG))
		done <- result{pdf, err}
	}()
	var pid int
	testenv.EventuallyWithin(t, 10*time.Second, "rsvg-convert shows up as the sandbox's child", func() bool {
		if pids := converterChildren(t); len(pids) > 0 {
			pid = pids[0]
		}
		return pid != 0
	})
	// The child is in its own process group and, where the kernel allows,
	// its own network namespace.
	pgid, err := syscall.Getpgid(pid)
	if err != nil || pgid != pid {
		t.Errorf("getpgid(%d) = %d, %v, want its own group", pid, pgid, err)
	}
	mine, _ := os.Readlink("/proc/self/ns/net")
	theirs, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	t.Logf("network namespace: test %s, rsvg-convert %s (isolated: %v)", mine, theirs, mine != theirs && theirs != "")
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil || len(env) != 0 {
		t.Errorf("/proc/%d/environ = %q, %v, want an empty environment", pid, env, err)
	}
	// The limits are set right after the start, before the SVG is sent, so
	// the child may be seen a moment before they show.
	var lim []byte
	testenv.EventuallyWithin(t, 5*time.Second, "rsvg-convert's address space limit shows", func() bool {
		lim, err = os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
		return err != nil || strings.Contains(string(lim), "Max address space         1073741824")
	})
	if err != nil || !strings.Contains(string(lim), "Max address space         1073741824") ||
		!strings.Contains(string(lim), "Max cpu time              20                   21") {
		t.Errorf("/proc/%d/limits = %s, %v, want address space 1 GiB and CPU 20/21 s", pid, lim, err)
	}
	// So is its CPU priority: the server's goroutines come first.
	var nice int
	testenv.EventuallyWithin(t, 5*time.Second, "rsvg-convert's nice shows", func() bool {
		nice, err = childproc.NiceOf(pid)
		return err != nil || nice == childproc.Nice
	})
	if err != nil || nice != childproc.Nice {
		t.Errorf("rsvg-convert's nice = %d, %v, want %d", nice, err, childproc.Nice)
	}
	cancel()
	r := <-done
	var le *limits.Error
	var ce *convError
	if !errors.Is(r.err, context.Canceled) || errors.As(r.err, &le) || errors.As(r.err, &ce) {
		t.Errorf("svgToPDF(cancelled) = %v, want a wrapped context.Canceled", r.err)
	}
	noConverterLeft(t, pgid)
}

// TestSVGBounds: time and memory bounds end in a 413 resource error, a
// broken SVG and an oversized PDF in a 422 image problem; no process
// survives any of them.
func TestSVGBounds(t *testing.T) {
	testenv.Require(t, "rsvg-convert")
	diagram := mustRead(t, "testdata/good/diagram.svg")
	def := defaultSandbox()
	short := def
	short.timeout = time.Second
	small := def
	small.memory = 256 << 20
	tinyOut := def
	tinyOut.maxPDF = 1000
	tests := []struct {
		name     string
		sb       sandbox
		svg      string
		resource bool
		want     string
	}{
		{"timeout", short, slowSVG, true, "took longer than 1s"},
		{"memory", small, floodSVG, true, "memory"},
		{"broken", def, svgOpen + `<rect`, false, "the SVG cannot be drawn: XML parse error"},
		{"output cap", tinyOut, string(diagram), false, "a PDF of more than 1000 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.sb.svgToPDF(context.Background(), t.TempDir(), []byte(tt.svg))
			var ce *convError
			if !errors.As(err, &ce) || ce.resource != tt.resource || !strings.Contains(ce.msg, tt.want) {
				t.Errorf("svgToPDF = %v, want a problem (resource %v) containing %q", err, tt.resource, tt.want)
			}
			noConverterLeft(t, 0)
		})
	}
}

// TestConvertResource: through Convert, an SVG over its time is 413
// resource, not 422, and names the image.
func TestConvertResource(t *testing.T) {
	testenv.Require(t, "rsvg-convert")
	set, err := Load(context.Background(), []Ref{{"ok.png", 1}, {"slow.svg", 3}}, Assets{
		"ok.png":   mustRead(t, "testdata/good/tiny.png"),
		"slow.svg": []byte(slowSVG),
	})
	if err != nil {
		t.Fatal(err)
	}
	sb := defaultSandbox()
	sb.timeout = time.Second
	_, err = set.convert(context.Background(), t.TempDir(), sb, nil)
	le := limitsError(t, err, limits.KindTooLarge)
	if le.Code() != limits.CodeResource || !strings.Contains(le.Problems[0].Message, "slow.svg: its conversion took longer than 1s") {
		t.Errorf("Convert(slow.svg) = %v, want 413 resource naming slow.svg", le)
	}
	noConverterLeft(t, 0)
}

// BenchmarkSVGToPDF measures one sandboxed conversion of a small diagram
// (the shared architecture.svg when present), with and without the user
// and network namespaces.
func BenchmarkSVGToPDF(b *testing.B) {
	testenv.Require(b, "rsvg-convert")
	svg, err := os.ReadFile("testdata/good/diagram.svg")
	if shared := testenv.SharedDir(b, moduleRoot); shared != "" {
		svg, err = os.ReadFile(filepath.Join(shared, "corpus", "images", "architecture.svg"))
	}
	if err != nil {
		b.Fatal(err)
	}
	for _, isolate := range []bool{true, false} {
		b.Run(fmt.Sprintf("isolate=%v", isolate), func(b *testing.B) {
			sb := defaultSandbox()
			sb.isolate = isolate
			for b.Loop() {
				if _, err := sb.svgToPDF(context.Background(), b.TempDir(), svg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoad measures the gateway's share for the good test images:
// reading, sniffing, header and structure checks, SVG rules.
func BenchmarkLoad(b *testing.B) {
	refs := []Ref{{"tiny.png", 1}, {"tiny.jpg", 2}, {"anim.gif", 3}, {"tiny.webp", 4}, {"diagram.svg", 5}}
	src := Dir("testdata/good")
	if shared := testenv.SharedDir(b, moduleRoot); shared != "" {
		refs = []Ref{{"chart.png", 1}, {"photo.jpg", 2}, {"architecture.svg", 3}}
		src = Dir(filepath.Join(shared, "corpus", "images"))
	}
	for b.Loop() {
		if _, err := Load(context.Background(), refs, src); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPageSize reads the page size of rsvg-convert's PDFs with the parser
// and compares it with pdfinfo's: this machine's rsvg-convert (Debian 12's
// 2.54 writes the page dictionary as plain text), Debian 13's 2.60, which
// writes it inside a compressed object stream
// (testdata/diagram-rsvg-2.60.pdf, made by `rsvg-convert --format=pdf <
// testdata/good/diagram.svg` on trixie; the image test converts live
// there), the same rewritten by qpdf with object streams, and a MediaBox
// inherited from the page tree.
func TestPageSize(t *testing.T) {
	testenv.Require(t, "rsvg-convert", "pdfinfo", "qpdf")
	dir := t.TempDir()
	live, err := defaultSandbox().svgToPDF(context.Background(), dir, mustRead(t, "testdata/good/diagram.svg"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	trixie := mustRead(t, "testdata/diagram-rsvg-2.60.pdf")
	// The case the byte search missed: no page box in the clear.
	if bytes.Contains(trixie, []byte("/MediaBox")) {
		t.Fatal("testdata/diagram-rsvg-2.60.pdf shows /MediaBox in the clear; it should be the object-stream PDF of librsvg 2.60")
	}
	// qpdf, run on PDFs it finds damaged (cairo 1.16 writing to a pipe
	// leaves an entry of the cross-reference table wrong; readers rebuild
	// it), exits 3: done, with warnings.
	qpdf := func(args ...string) {
		t.Helper()
		out, err := exec.Command("qpdf", args...).CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 3) {
			t.Fatalf("qpdf %v: %v\n%s", args, err, out)
		}
	}
	qpdfOut := filepath.Join(dir, "objstm.pdf")
	qpdf("--object-streams=generate", write("live.pdf", live), qpdfOut)
	// A page that inherits its box from the page tree, its cross-reference
	// table written by qpdf.
	handmade := "%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n" +
		"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 /MediaBox [10 20 110.5 70] >> endobj\n" +
		"3 0 obj << /Type /Page /Parent 2 0 R >> endobj\ntrailer << /Size 4 /Root 1 0 R >>\n%%EOF\n"
	inherited := filepath.Join(dir, "inherited.pdf")
	qpdf(write("handmade.pdf", []byte(handmade)), inherited)
	for _, tt := range []struct {
		name string
		path string
		w, h float64
	}{
		{"this machine's rsvg-convert", filepath.Join(dir, "live.pdf"), 240, 90},
		{"librsvg 2.60 (Debian 13)", "testdata/diagram-rsvg-2.60.pdf", 240, 90},
		{"object streams by qpdf", qpdfOut, 240, 90},
		{"inherited MediaBox", inherited, 100.5, 50},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := mustRead(t, tt.path)
			w, h, err := PageSize(data)
			if err != nil || w != tt.w || h != tt.h {
				t.Errorf("PageSize(%s) = %g×%g, %v, want %g×%g", tt.path, w, h, err, tt.w, tt.h)
			}
			if pw, ph := pdfPageSize(t, tt.path); math.Abs(pw-w) > 0.01 || math.Abs(ph-h) > 0.01 {
				t.Errorf("PageSize(%s) = %g×%g, pdfinfo says %g×%g", tt.path, w, h, pw, ph)
			}
		})
	}
	// Damaged PDFs are errors, never a panic.
	for name, data := range map[string][]byte{
		"empty":     nil,
		"not a PDF": []byte("GIF89a"),
		"truncated": trixie[:len(trixie)/2],
		"short":     []byte("%PDF-1.5\n"),
		"no pages":  []byte("%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"),
	} {
		if w, h, err := PageSize(data); err == nil {
			t.Errorf("PageSize(%s) = %g×%g, nil error, want an error", name, w, h)
		}
	}
}

// TestConvertScratch: an SVG converts with no usable temporary folder
// (TMPDIR names none, as a read-only /tmp would be in a container): the
// converter's working folder is made in the render's folder.
func TestConvertScratch(t *testing.T) {
	testenv.Require(t, "rsvg-convert")
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	set, err := Load(context.Background(), []Ref{{"diagram.svg", 1}}, Dir("testdata/good"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	got, err := set.Convert(context.Background(), dir, nil)
	if err != nil {
		t.Fatalf("Convert with TMPDIR missing = %v, want the SVG converted", err)
	}
	if c := got["diagram.svg"]; c.File == "" || c.Width != 240 || c.Height != 90 {
		t.Errorf("Convert(diagram.svg) = %+v, want a 240×90 PDF", c)
	}
	// Nothing of the converter's is left beside the images.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !canonicalName.MatchString(e.Name()) {
			t.Errorf("%s left in the render's folder", e.Name())
		}
	}
}

// TestExitProblemSignals: a converter killed with SIGKILL before its CPU
// time ran out was killed for memory (the container's OOM killer); after,
// or by SIGXCPU, for CPU time. Both are 413 resource problems.
func TestExitProblemSignals(t *testing.T) {
	killed := func(t *testing.T, burn bool, sig syscall.Signal) *exec.ExitError {
		t.Helper()
		script := "sleep 30"
		if burn {
			script = "while :; do :; done"
		}
		cmd := exec.Command("sh", "-c", "exec sh -c '"+script+"'")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A burner runs until it has used more than a second of CPU time
		// (utime + stime in /proc, in clock ticks of 10 ms).
		if burn {
			testenv.EventuallyWithin(t, time.Minute, "the burner used over 1.1 s of CPU time", func() bool {
				stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
				if err != nil {
					t.Fatal(err)
				}
				f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
				utime, _ := strconv.Atoi(f[11])
				stime, _ := strconv.Atoi(f[12])
				return utime+stime > 110
			})
		}
		_ = cmd.Process.Signal(sig)
		var ee *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &ee) {
			t.Fatalf("wait = %v, want an exit error", err)
		}
		return ee
	}
	for _, tt := range []struct {
		name     string
		burn     bool
		sig      syscall.Signal
		cpuLimit uint64
		want     string
	}{
		{"SIGKILL, CPU time left", false, syscall.SIGKILL, 20, "more memory"},
		{"SIGKILL, CPU time used up", true, syscall.SIGKILL, 1, "CPU time"},
		{"SIGXCPU", false, syscall.SIGXCPU, 20, "CPU time"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := exitProblem(killed(t, tt.burn, tt.sig), nil, tt.cpuLimit)
			var ce *convError
			if !errors.As(err, &ce) || !ce.resource || !strings.Contains(ce.msg, tt.want) {
				t.Errorf("exitProblem(%s) = %v, want a resource problem saying %q", tt.name, err, tt.want)
			}
		})
	}
}
