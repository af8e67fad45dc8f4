package office

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
)

// TestDetectCorpus: every file of the corpus is recognised as the kind
// expect.json gives, or refused with the answer its hostile class asks
// for, by content alone (the name is withheld but for the CSV).
func TestDetectCorpus(t *testing.T) {
	for name, e := range loadExpect(t) {
		b := readCorpus(t, name)
		hint := ""
		if strings.HasSuffix(name, ".csv") {
			hint = "data.csv"
		}
		f, err := Detect(b, hint)
		kind, code := kindOf(err)
		hostile := ""
		if e.Hostile != nil {
			hostile = *e.Hostile
		}
		switch {
		case hostile == "encrypted":
			if kind != limits.KindDocument || code != limits.CodeEncrypted {
				t.Errorf("Detect(%s) = %v, %v; want a password-protected refusal (422 encrypted)", name, f, err)
			}
		case hostile == "corrupt", hostile == "bomb", strings.Contains(name, "xxe"):
			if kind != limits.KindDocument || code != limits.CodeCorrupt || !strings.Contains(err.Error(), strings.ToUpper(e.Kind)) {
				t.Errorf("Detect(%s) = %v, %v; want a 422 corrupt naming %s", name, f, err, strings.ToUpper(e.Kind))
			}
		default:
			if err != nil || f.Name != e.Kind {
				t.Errorf("Detect(%s) = %v, %v; want %s", name, f, err, e.Kind)
			}
		}
	}
}

// legacyWithFlag returns a corpus CFB document with bytes at off of the
// named root stream replaced: how an encrypted DOC or XLS differs from a
// plain one where Detect looks.
func legacyWithFlag(t *testing.T, file, stream string, patch func(head []byte)) []byte {
	t.Helper()
	b := bytes.Clone(readCorpus(t, file))
	c, err := openCFB(b)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := c.root()[stream]
	if !ok || e.size < c.miniCutoff {
		t.Fatalf("%s: no regular stream %s", file, stream)
	}
	// The stream's first sector, in place.
	off := (int(e.start) + 1) << c.shift
	patch(b[off : off+1<<c.shift])
	return b
}

func TestDetect(t *testing.T) {
	docx := readCorpus(t, "word-google-docs.docx")
	// A ZIP entry whose directory says it unpacks 1000:1 (or to 600 MiB):
	// the bound is read from the directory, before anything is unpacked.
	declared := func(name string, comp, uncomp uint64) []byte {
		var out bytes.Buffer
		zw := zip.NewWriter(&out)
		for _, e := range []struct {
			name string
			data string
		}{{"[Content_Types].xml", `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`}} {
			w, err := zw.Create(e.name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
		w, err := zw.CreateRaw(&zip.FileHeader{Name: name, Method: zip.Deflate, CompressedSize64: comp, UncompressedSize64: uncomp})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(make([]byte, comp)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	doc := legacyWithFlag(t, "word97-table.doc", "WordDocument", func(h []byte) {
		binary.LittleEndian.PutUint16(h[10:], binary.LittleEndian.Uint16(h[10:])|0x0100) // fEncrypted
	})
	xls := legacyWithFlag(t, "excel97-charts.xls", "Workbook", func(h []byte) {
		// The record after BOF becomes FILEPASS.
		n := binary.LittleEndian.Uint16(h[2:])
		binary.LittleEndian.PutUint16(h[4+n:], 0x002F)
	})
	for _, tc := range []struct {
		what     string
		doc      []byte
		filename string
		want     string      // the format, or
		kind     limits.Kind // the refusal's kind and code
		code     string
	}{
		{"docx", docx, "", "docx", "", ""},
		{"docx named .pdf", docx, "x.pdf", "docx", "", ""},
		{"empty", nil, "a.docx", "", limits.KindUnsupported, limits.CodeFormat},
		{"pdf named .docx", []byte("%PDF-1.7\n..."), "a.docx", "", limits.KindUnsupported, limits.CodeFormat},
		{"png", []byte("\x89PNG\r\n\x1a\n...."), "", "", limits.KindUnsupported, limits.CodeFormat},
		{"plain text", []byte("Dear reader,\nthis is a letter.\n"), "letter.txt", "", limits.KindUnsupported, limits.CodeFormat},
		{"csv by name", []byte("Dear reader,\nthis is a letter.\n"), "letter.csv", "csv", "", ""},
		{"csv by content", []byte("a,b,c\n1,2,3\n4,5,6\n"), "", "csv", "", ""},
		{"csv semicolons", []byte("a;b;c\n1;2;3\n"), "", "csv", "", ""},
		{"markdown", []byte("# Title\n\nSome *text*.\n"), "", "", limits.KindUnsupported, limits.CodeFormat},
		{"rtf", []byte(`{\rtf1\ansi Hello}`), "", "rtf", "", ""},
		{"html", []byte("<!DOCTYPE html><html><body>x</body></html>"), "a.doc", "", limits.KindUnsupported, limits.CodeFormat},
		{"plain zip", buildZip(t, [][2]string{{"a.txt", "hello"}}), "a.docx", "", limits.KindUnsupported, limits.CodeFormat},
		{"odg", buildZip(t, [][2]string{{"mimetype", "application/vnd.oasis.opendocument.graphics"}}), "", "", limits.KindUnsupported, limits.CodeFormat},
		{"over 50 MiB", append(bytes.Clone(docx), make([]byte, limits.MaxOfficeBytes)...), "", "", limits.KindTooLarge, limits.CodeTooLarge},
		{"entry past 100:1", declared("word/media/a.bin", 10_000, 2<<20), "", "", limits.KindTooLarge, limits.CodeTooLarge},
		{"unpacks past 512 MiB", declared("word/media/big.bin", 10<<20, 600<<20), "", "", limits.KindTooLarge, limits.CodeTooLarge},
		{"small entry past 100:1", declared("word/media/a.bin", 100, 200_000), "", "docx", "", ""},
		{"truncated docx", docx[:len(docx)/2], "", "", limits.KindDocument, limits.CodeCorrupt},
		{"doc with fEncrypted", doc, "", "", limits.KindDocument, limits.CodeEncrypted},
		{"xls with FILEPASS", xls, "", "", limits.KindDocument, limits.CodeEncrypted},
		{"damaged compound file", append(bytes.Clone(cfbMagic), make([]byte, 100)...), "", "", limits.KindDocument, limits.CodeCorrupt},
		{"docx with a DTD", rewriteZip(t, docx, func(name string, b []byte) []byte {
			if name == "word/document.xml" {
				return bytes.Replace(b, []byte("?>"), []byte(`?><!DOCTYPE w:document [<!ENTITY e "x">]>`), 1)
			}
			return b
		}), "", "", limits.KindDocument, limits.CodeCorrupt},
	} {
		f, err := Detect(tc.doc, tc.filename)
		kind, code := kindOf(err)
		if tc.want != "" {
			if err != nil || f.Name != tc.want {
				t.Errorf("Detect(%s) = %v, %v; want %s", tc.what, f, err, tc.want)
			}
			continue
		}
		if kind != tc.kind || code != tc.code {
			t.Errorf("Detect(%s) = %v, %v; want a %s/%s refusal", tc.what, f, err, tc.kind, tc.code)
		}
	}
}
