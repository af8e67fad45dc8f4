package forms

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/limits"
)

// Hostile PDFs are made here, byte by byte: a reader that trusted them would
// recurse without end, loop, or inflate gigabytes. Each must end in a clear
// answer (a *limits.Error, never an internal error, a hang or a crash of the
// test process) within the bounds of the qpdf sandbox.

// pdfWriter assembles a PDF from numbered objects with a classic xref table.
type pdfWriter struct {
	buf  bytes.Buffer
	offs map[int]int
}

func newPDF() *pdfWriter {
	w := &pdfWriter{offs: map[int]int{}}
	w.buf.WriteString("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	return w
}

func (w *pdfWriter) obj(n int, body string) {
	w.offs[n] = w.buf.Len()
	fmt.Fprintf(&w.buf, "%d 0 obj\n%s\nendobj\n", n, body)
}

func (w *pdfWriter) stream(n int, dict string, data []byte) {
	w.offs[n] = w.buf.Len()
	fmt.Fprintf(&w.buf, "%d 0 obj\n<< %s /Length %d >>\nstream\n", n, dict, len(data))
	w.buf.Write(data)
	w.buf.WriteString("\nendstream\nendobj\n")
}

func (w *pdfWriter) finish(size int) []byte {
	xref := w.buf.Len()
	fmt.Fprintf(&w.buf, "xref\n0 %d\n0000000000 65535 f \n", size)
	for i := 1; i < size; i++ {
		fmt.Fprintf(&w.buf, "%010d 00000 n \n", w.offs[i])
	}
	fmt.Fprintf(&w.buf, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", size, xref)
	return w.buf.Bytes()
}

// zlibBomb is a zlib stream that inflates to n MiB of zeros: one
// compressed MiB repeated (each copy is whole deflate blocks ending in a
// byte-aligned sync flush, so copies chain), then a final empty block.
func zlibBomb(t *testing.T, mib int) []byte {
	t.Helper()
	var chunk bytes.Buffer
	fw, _ := flate.NewWriter(&chunk, flate.BestCompression)
	// Writes into a bytes.Buffer cannot fail.
	_, _ = fw.Write(make([]byte, 1<<20))
	_ = fw.Flush()
	out := []byte{0x78, 0xDA}
	for range mib {
		out = append(out, chunk.Bytes()...)
	}
	out = append(out, 0x03, 0x00)                // final, empty fixed-Huffman block
	return binary.BigEndian.AppendUint32(out, 1) // checksum (wrong; never reached in time)
}

func TestHostilePDFs(t *testing.T) {
	f := newTestFiller(t)
	page := "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Annots [4 0 R] >>"
	field := "<< /Type /Annot /Subtype /Widget /FT /Tx /T (name) /Rect [10 10 100 30] /P 3 0 R >>"
	cases := map[string]func() []byte{
		"deep nesting": func() []byte {
			w := newPDF()
			deep := strings.Repeat("[", 200000) + strings.Repeat("]", 200000)
			w.obj(1, "<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [4 0 R] >> /Deep "+deep+" >>")
			w.obj(2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
			w.obj(3, page)
			w.obj(4, field)
			return w.finish(5)
		},
		"reference loops": func() []byte {
			w := newPDF()
			w.obj(1, "<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [4 0 R 5 0 R] >> >>")
			// The page tree contains itself; the fields are their own
			// parents and kids.
			w.obj(2, "<< /Type /Pages /Kids [3 0 R 2 0 R] /Count 2 >>")
			w.obj(3, page)
			w.obj(4, "<< /Type /Annot /Subtype /Widget /FT /Tx /T (a) /Parent 5 0 R /Kids [5 0 R] /Rect [10 10 100 30] /P 3 0 R >>")
			w.obj(5, "<< /T (b) /Parent 4 0 R /Kids [4 0 R 5 0 R] /MaxLen 6 0 R >>")
			w.obj(6, "6 0 R")
			return w.finish(7)
		},
		"inflate bomb in the page content": func() []byte {
			w := newPDF()
			w.obj(1, "<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [4 0 R] >> >>")
			w.obj(2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
			w.obj(3, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Annots [4 0 R] /Contents 5 0 R >>")
			w.obj(4, field)
			w.stream(5, "/Filter /FlateDecode", zlibBomb(t, 4096)) // 4 GiB
			return w.finish(6)
		},
		"inflate bomb in an object stream": func() []byte {
			// The field lives in an object stream that inflates to 4 GiB:
			// qpdf must inflate it to read the field.
			w := newPDF()
			w.obj(1, "<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [4 0 R] >> >>")
			w.obj(2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
			w.obj(3, page)
			w.stream(5, "/Type /ObjStm /N 1 /First 4 /Filter /FlateDecode", zlibBomb(t, 4096))
			// An xref stream: object 4 is the first object of stream 5.
			offsXref := w.buf.Len()
			var rows []byte
			row := func(typ byte, a uint32, b uint16) {
				rows = append(rows, typ)
				rows = binary.BigEndian.AppendUint32(rows, a)
				rows = binary.BigEndian.AppendUint16(rows, b)
			}
			row(0, 0, 65535)
			for i := 1; i <= 3; i++ {
				row(1, uint32(w.offs[i]), 0)
			}
			row(2, 5, 0)
			row(1, uint32(w.offs[5]), 0)
			row(1, uint32(offsXref), 0)
			fmt.Fprintf(&w.buf, "7 0 obj\n<< /Type /XRef /Size 8 /W [1 4 2] /Root 1 0 R /Length %d >>\nstream\n", len(rows))
			w.buf.Write(rows)
			fmt.Fprintf(&w.buf, "\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n", offsXref)
			return w.buf.Bytes()
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			pdf := mk()
			res, err := f.Fill(context.Background(), pdf, []byte(`{}`), nil)
			if err != nil {
				var le *limits.Error
				if !errors.As(err, &le) {
					t.Fatalf("Fill = %v, want a clear answer (*limits.Error) or a PDF", err)
				}
				t.Logf("Fill: %v", err)
				return
			}
			if int64(len(res.PDF)) > limits.MaxPDFBytes || !bytes.HasPrefix(res.PDF, []byte("%PDF-")) {
				t.Fatalf("Fill made %d bytes starting %q", len(res.PDF), res.PDF[:min(8, len(res.PDF))])
			}
			t.Logf("Fill: a PDF of %d bytes, %d pages", len(res.PDF), res.Pages)
		})
	}
}

// qpdfObjects is every object of a PDF as qpdf's JSON lists it (an
// independent reading of our output).
func qpdfObjects(t *testing.T, pdf []byte) map[string]any {
	t.Helper()
	out := run(t, "qpdf", "--json=2", "--json-key=qpdf", writeTemp(t, "x.pdf", pdf))
	var j struct {
		Qpdf []json.RawMessage `json:"qpdf"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil || len(j.Qpdf) != 2 {
		t.Fatalf("qpdf --json: %v", err)
	}
	var objs map[string]any
	if err := json.Unmarshal(j.Qpdf[1], &objs); err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestFlattenDropsScripts: a filled form keeps no document JavaScript (the
// catalog's /OpenAction, /AA and /Names /JavaScript, a page's /AA, a
// link's JavaScript action); a destination to open at and a URI link stay.
func TestFlattenDropsScripts(t *testing.T) {
	f := newTestFiller(t)
	for _, openAt := range []string{"8 0 R", "[3 0 R /Fit]"} {
		w := newPDF()
		w.obj(1, "<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [4 0 R] >> /OpenAction "+openAt+
			" /AA << /WC << /S /JavaScript /JS (app.alert\\(1\\)) >> >> /Names 5 0 R >>")
		w.obj(2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
		w.obj(3, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Annots [4 0 R 6 0 R 7 0 R] /AA << /O << /S /JavaScript /JS (x) >> >> >>")
		w.obj(4, "<< /Type /Annot /Subtype /Widget /FT /Tx /T (name) /Rect [10 10 100 30] /P 3 0 R /AA << /K << /S /JavaScript /JS (k) >> >> >>")
		w.obj(5, "<< /JavaScript << /Names [(a) 9 0 R] >> /Dests << /Names [(top) [3 0 R /Fit]] >> >>")
		w.obj(6, "<< /Type /Annot /Subtype /Link /Rect [10 50 100 70] /A << /S /URI /URI (https://example.com/) >> >>")
		w.obj(7, "<< /Type /Annot /Subtype /Link /Rect [10 80 100 100] /A << /S /GoTo /D [3 0 R /Fit] /Next [<< /S /JavaScript /JS (n) >>] >> >>")
		w.obj(8, "<< /S /JavaScript /JS (this.print\\(\\)) >>")
		w.obj(9, "<< /S /JavaScript /JS (open) >>")
		res, err := f.Fill(context.Background(), w.finish(10), []byte(`{"name": "Ada"}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		objs := qpdfObjects(t, res.PDF)
		all, _ := json.Marshal(objs)
		if bytes.Contains(all, []byte(`"/JavaScript"`)) || bytes.Contains(all, []byte(`"/AA"`)) {
			t.Errorf("OpenAction %s: the filled form still has JavaScript or /AA: %s", openAt, all)
		}
		if !bytes.Contains(all, []byte("https://example.com/")) || !bytes.Contains(all, []byte(`"/Dests"`)) {
			t.Errorf("OpenAction %s: the URI link or the named destinations went: %s", openAt, all)
		}
		hasOpen := bytes.Contains(all, []byte(`"/OpenAction"`))
		if want := strings.HasPrefix(openAt, "["); hasOpen != want {
			t.Errorf("OpenAction %s: kept = %v, want %v (only a destination stays)", openAt, hasOpen, want)
		}
		if text := run(t, "pdftotext", writeTemp(t, "out.pdf", res.PDF), "-"); !strings.Contains(text, "Ada") {
			t.Errorf("the value is not in the text: %q", text)
		}
	}
}

// TestDamagedFieldsReported: fields the form lists but qpdf cannot read
// (not a dictionary, a missing kid, /Kids that is not a list) are reported
// as warnings by List and Fill, not silently left out.
func TestDamagedFieldsReported(t *testing.T) {
	f := newTestFiller(t)
	w := newPDF()
	w.obj(1, "<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [4 0 R 5 0 R 6 0 R 7 0 R] >> >>")
	w.obj(2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	w.obj(3, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Annots [4 0 R 6 0 R] >>")
	w.obj(4, "<< /Type /Annot /Subtype /Widget /FT /Tx /T (good) /Rect [10 10 100 30] /P 3 0 R >>")
	w.obj(5, "(not a dictionary)")
	w.obj(6, "<< /FT /Tx /T (kids) /Kids [4 0 R 9 0 R] >>")
	w.obj(7, "<< /FT /Tx /T (lost) /Kids 8 0 R >>")
	w.obj(8, "42")
	pdf := w.finish(9)
	l, err := f.List(context.Background(), pdf)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"object 5 0", `"kids" (object 9 0)`, `field "lost" has /Kids`}
	if len(l.Warnings) != len(want) {
		t.Fatalf("List warnings = %+v, want %d", l.Warnings, len(want))
	}
	for i, w := range want {
		if p := l.Warnings[i]; p.Code != CodeDamagedField || !strings.Contains(p.Message, w) {
			t.Errorf("warning %d = %+v, want %s mentioning %s", i, p, CodeDamagedField, w)
		}
	}
	res, err := f.Fill(context.Background(), pdf, []byte(`{"good": "yes"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != len(want) {
		t.Errorf("Fill warnings = %+v, want %d", res.Warnings, len(want))
	}
	// The forms of other producers have no damaged field.
	for _, name := range []string{"acrobat-basic.pdf", "acrobat-textfields.pdf", "libreoffice.pdf", "openoffice.pdf", "indesign.pdf", "livecycle-1040.pdf", "hyperref.pdf"} {
		l, err := f.List(context.Background(), sharedForm(t, name))
		if err != nil {
			t.Errorf("List(%s) = %v", name, err)
		} else if len(l.Warnings) > 0 {
			t.Errorf("List(%s) warnings = %+v, want none", name, l.Warnings)
		}
	}
}

// manyFields is a form of n text fields on n/1000+1 pages, each its own
// widget: 100,000 of them make a 17 MB PDF like the red team's.
func manyFields(n int) []byte {
	pages := n/1000 + 1
	w := newPDF()
	var fields strings.Builder
	perPage := make([]strings.Builder, pages)
	first := 3 + pages
	for i := range n {
		ref := fmt.Sprintf("%d 0 R ", first+i)
		fields.WriteString(ref)
		perPage[i%pages].WriteString(ref)
	}
	w.obj(1, "<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields ["+fields.String()+"] >> >>")
	var kids strings.Builder
	for p := range pages {
		fmt.Fprintf(&kids, "%d 0 R ", 3+p)
	}
	w.obj(2, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", kids.String(), pages))
	for p := range pages {
		w.obj(3+p, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Annots ["+perPage[p].String()+"] >>")
	}
	for i := range n {
		k := i / pages
		w.obj(first+i, fmt.Sprintf("<< /Type /Annot /Subtype /Widget /FT /Tx /T (field%06d) /V (value %d) /Rect [%d %d %d %d] /P %d 0 R /DA (/Helv 8 Tf 0 g) >>",
			i, i, 10+k%30*18, 10+k/30*20%700, 26+k%30*18, 28+k/30*20%700, 3+i%pages))
	}
	return w.finish(first + n)
}

// childCPU is the CPU time of this process's finished children (qpdf).
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestReadBoundedByFields: a form far past MaxFields is refused for what it
// holds before qpdf lists its fields: 100,000 fields (17 MB, the red
// team's) by its objects, 12,000 (within MaxObjects) by the fields and
// widgets in its objects. Each costs about what reading a form at the
// bound costs (qpdf's CPU and the bytes outprint allocates, as ratios to
// that form's), not 50 times as much. Before, qpdf listed every field
// (15 s, 960 MB) and outprint decoded 109 MB of JSON (~430 MiB) to count
// them.
func TestReadBoundedByFields(t *testing.T) {
	f := newTestFiller(t)
	cost := func(pdf []byte) (time.Duration, uint64, error) {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		c0 := childCPU()
		_, err := f.Fields(context.Background(), pdf)
		c := childCPU() - c0
		runtime.ReadMemStats(&m1)
		return c, m1.TotalAlloc - m0.TotalAlloc, err
	}
	atBound := manyFields(MaxFields)
	cpu1, alloc1, err := cost(atBound)
	if err != nil {
		t.Fatalf("Fields(%d fields) = %v", MaxFields, err)
	}
	for _, n := range []int{100_000, 12_000} {
		pdf := manyFields(n)
		cpu2, alloc2, err := cost(pdf)
		var le *limits.Error
		if !errors.As(err, &le) || le.Kind != limits.KindTooLarge {
			t.Fatalf("Fields(%d fields) = %v, want too large", n, err)
		}
		t.Logf("%d fields (%d KB): qpdf %v, %d KB allocated; %d fields (%d KB): qpdf %v, %d KB allocated, %v",
			MaxFields, len(atBound)>>10, cpu1, alloc1>>10, n, len(pdf)>>10, cpu2, alloc2>>10, err)
		const maxRatio = 10
		if r := float64(cpu2) / float64(max(cpu1, 10*time.Millisecond)); r > maxRatio {
			t.Errorf("refusing %d fields cost qpdf %v, ×%.1f the %v of a form of %d fields, want at most ×%d", n, cpu2, r, cpu1, MaxFields, maxRatio)
		}
		if r := float64(alloc2) / float64(alloc1); r > maxRatio {
			t.Errorf("refusing %d fields allocated %d KB, ×%.1f the %d KB of a form of %d fields, want at most ×%d", n, alloc2>>10, r, alloc1>>10, MaxFields, maxRatio)
		}
	}
}

// TestReadBoundedByObjects: a PDF of more than MaxObjects objects is
// refused while qpdf lists them.
func TestReadBoundedByObjects(t *testing.T) {
	f := newTestFiller(t)
	w := newPDF()
	w.obj(1, "<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [4 0 R] >> >>")
	w.obj(2, "<< /Type /Pages /Kids [3 0 R] /Count 1 >>")
	w.obj(3, "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Annots [4 0 R] >>")
	w.obj(4, "<< /Type /Annot /Subtype /Widget /FT /Tx /T (name) /Rect [10 10 100 30] /P 3 0 R >>")
	for i := 5; i < MaxObjects+10; i++ {
		w.obj(i, "<<>>")
	}
	_, err := f.Fields(context.Background(), w.finish(MaxObjects+10))
	var le *limits.Error
	if !errors.As(err, &le) || le.Kind != limits.KindTooLarge || !strings.Contains(le.Error(), "objects") {
		t.Fatalf("Fields(%d objects) = %v, want too large naming the objects", MaxObjects+10, err)
	}
}

// TestReadCancelKillsQpdf: when the request ends (client gone, deadline),
// the qpdf reading its form is killed with its process group, not left to
// finish.
func TestReadCancelKillsQpdf(t *testing.T) {
	f := newTestFiller(t)
	// A form that keeps qpdf busy for a while: many fields, within
	// MaxObjects.
	pdf := manyFields(MaxObjects - 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.Fields(ctx, pdf)
		done <- err
	}()
	pid := waitChild(t, "qpdf")
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Fields after cancel = %v, want context.Canceled", err)
	}
	if _, serr := os.Stat(fmt.Sprintf("/proc/%d", pid)); serr == nil {
		t.Errorf("qpdf (pid %d) still runs after Fields returned", pid)
	}
}

// waitChild waits until a child of this process runs name and returns its
// pid.
func waitChild(t *testing.T, name string) int {
	t.Helper()
	self := os.Getpid()
	for range 2000 {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				continue
			}
			// pid (comm) state ppid …
			s := string(stat)
			i := strings.LastIndexByte(s, ')')
			if i < 0 || !strings.Contains(s[:i], "("+name) {
				continue
			}
			if fs := strings.Fields(s[i+1:]); len(fs) > 1 && fs[1] == strconv.Itoa(self) {
				return pid
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no %s child started", name)
	return 0
}
