package forms

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

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
	fw.Write(make([]byte, 1<<20))
	fw.Flush()
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
