package office

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/limits"
)

// Format is a document format Detect recognised.
type Format struct {
	// Name is the format: "docx", "docm", "doc", "odt", "rtf", "xlsx",
	// "xlsm", "xls", "ods", "csv", "pptx", "ppt" or "odp". Templates and
	// slide shows are named by the format they share (a .dotx is "docx",
	// a .ppsx or .pptm "pptx").
	Name string
	// Family is "text", "spreadsheet" or "presentation".
	Family string
}

// Family values.
const (
	FamilyText         = "text"
	FamilySpreadsheet  = "spreadsheet"
	FamilyPresentation = "presentation"
)

// Formats returns every format Name in a fixed order: the bounded set of a
// metric label that carries a format.
func Formats() []string {
	return []string{"docx", "docm", "doc", "odt", "rtf", "xlsx", "xlsm", "xls", "ods", "csv", "pptx", "ppt", "odp"}
}

// upper is how messages name a format ("DOCX").
func (f Format) upper() string { return strings.ToUpper(f.Name) }

// maxEntries bounds the entries of a ZIP-based document. Real documents
// have tens to a few thousand (a presentation with many pictures); a
// hundred thousand empty entries would make the checks below, and
// LibreOffice, walk a directory for nothing.
const maxEntries = 10_000

// ratioFloor is the uncompressed size below which an entry's compression
// ratio is not checked: a small part of repeated markup compresses past
// 100:1 without being a bomb, and no entry that small can be one.
const ratioFloor = 1 << 20

// maxProlog bounds how much of an XML part Detect reads looking for its
// root element (and a DTD before it).
const maxProlog = 64 << 10

// Detect recognises the format of doc by its content: the magic bytes,
// an OOXML package's [Content_Types].xml, an ODF package's mimetype. The
// filename only breaks a tie the content cannot (CSV or plain text). It
// also checks the bounds that need no LibreOffice: the size, the unpacked
// size and compression ratio of ZIP entries, DTDs (entity bombs, external
// entities) in the XML of packages, and encryption. Its errors are
// *limits.Error: KindUnsupported (415) for what is not an Office document,
// KindDocument (422) for encrypted or damaged ones, KindTooLarge (413)
// past a bound.
func Detect(doc []byte, filename string) (Format, error) {
	if len(doc) > limits.MaxOfficeBytes {
		return Format{}, tooLarge(fmt.Sprintf("the file is too large to convert: %d bytes, at most %d (50 MiB)", len(doc), limits.MaxOfficeBytes))
	}
	switch {
	case len(doc) == 0:
		return Format{}, limits.Unsupported("an empty file")
	case bytes.HasPrefix(doc, []byte("PK\x03\x04")) || bytes.HasPrefix(doc, []byte("PK\x05\x06")):
		return detectZip(doc)
	case bytes.HasPrefix(doc, cfbMagic):
		return detectCFB(doc)
	case bytes.HasPrefix(bytes.TrimLeft(bytes.TrimPrefix(doc, []byte("\xEF\xBB\xBF")), " \t\r\n"), []byte(`{\rtf`)):
		return Format{Name: "rtf", Family: FamilyText}, nil
	}
	if what := knownOther(doc); what != "" {
		return Format{}, limits.Unsupported(what)
	}
	if isText(doc) {
		ext := strings.ToLower(path.Ext(filename))
		if ext == ".csv" || (filename == "" && looksCSV(doc)) {
			return Format{Name: "csv", Family: FamilySpreadsheet}, nil
		}
		return Format{}, limits.Unsupported("plain text")
	}
	return Format{}, limits.Unsupported("a file of unknown type")
}

func tooLarge(msg string) error {
	return &limits.Error{Kind: limits.KindTooLarge, Problems: []limits.Problem{{
		Source: limits.SourceDocument, Code: limits.CodeTooLarge, Message: msg,
	}}}
}

// knownOther names files people send by mistake.
func knownOther(b []byte) string {
	head := b[:min(len(b), 512)]
	switch {
	case bytes.HasPrefix(b, []byte("%PDF-")):
		return "a PDF document"
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "a PNG image"
	case bytes.HasPrefix(b, []byte("\xFF\xD8\xFF")):
		return "a JPEG image"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "a GIF image"
	case len(b) >= 12 && bytes.Equal(b[:4], []byte("RIFF")) && bytes.Equal(b[8:12], []byte("WEBP")):
		return "a WebP image"
	case bytes.HasPrefix(b, []byte("\x1F\x8B")):
		return "a gzip archive"
	case bytes.HasPrefix(b, []byte("7z\xBC\xAF\x27\x1C")):
		return "a 7-Zip archive"
	case bytes.HasPrefix(b, []byte("Rar!")):
		return "a RAR archive"
	}
	lower := bytes.ToLower(bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xEF\xBB\xBF")), " \t\r\n"))
	switch {
	case bytes.HasPrefix(lower, []byte("<!doctype html")), bytes.HasPrefix(lower, []byte("<html")):
		return "an HTML document"
	case bytes.HasPrefix(lower, []byte("<?xml")), bytes.HasPrefix(lower, []byte("<svg")):
		if bytes.Contains(lower, []byte("<svg")) {
			return "an SVG image"
		}
		return "an XML document (flat XML Office files are not converted; save as DOCX, XLSX, PPTX or ODF)"
	}
	return ""
}

// isText reports whether the first 64 KiB look like text: no NUL and few
// control characters.
func isText(b []byte) bool {
	b = b[:min(len(b), 64<<10)]
	ctl := 0
	for _, c := range b {
		switch {
		case c == 0:
			return false
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f':
			ctl++
		}
	}
	return ctl*100 <= len(b)
}

// csvSeparator guesses the field separator from the first line: the most
// frequent of comma, semicolon and tab outside quotes (comma on a tie).
func csvSeparator(b []byte) byte {
	line := b
	counts := map[byte]int{}
	quoted := false
	for _, c := range line[:min(len(line), 64<<10)] {
		if c == '"' {
			quoted = !quoted
		}
		if quoted {
			continue
		}
		if c == '\n' {
			break
		}
		if c == ',' || c == ';' || c == '\t' {
			counts[c]++
		}
	}
	sep := byte(',')
	for _, c := range []byte{';', '\t'} {
		if counts[c] > counts[sep] {
			sep = c
		}
	}
	return sep
}

// looksCSV is the guess for text that came without a name: at least two
// lines, and the separator as often in most of the first twenty lines as
// in the first (at least once).
func looksCSV(b []byte) bool {
	sep := csvSeparator(b)
	lines := strings.Split(strings.ReplaceAll(string(b[:min(len(b), 64<<10)]), "\r\n", "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[:20]
	}
	var nonEmpty []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			nonEmpty = append(nonEmpty, l)
		}
	}
	if len(nonEmpty) < 2 {
		return false
	}
	want := strings.Count(nonEmpty[0], string(sep))
	if want == 0 {
		return false
	}
	same := 0
	for _, l := range nonEmpty {
		if strings.Count(l, string(sep)) == want {
			same++
		}
	}
	return same*2 > len(nonEmpty)
}

// OOXML main parts' content types, by format.
var ooxmlTypes = map[string]Format{
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml":   {"docx", FamilyText},
	"application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml":   {"docx", FamilyText},
	"application/vnd.ms-word.document.macroEnabled.main+xml":                             {"docm", FamilyText},
	"application/vnd.ms-word.template.macroEnabledTemplate.main+xml":                     {"docm", FamilyText},
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml":         {"xlsx", FamilySpreadsheet},
	"application/vnd.openxmlformats-officedocument.spreadsheetml.template.main+xml":      {"xlsx", FamilySpreadsheet},
	"application/vnd.ms-excel.sheet.macroEnabled.main+xml":                               {"xlsm", FamilySpreadsheet},
	"application/vnd.ms-excel.template.macroEnabled.main+xml":                            {"xlsm", FamilySpreadsheet},
	"application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml": {"pptx", FamilyPresentation},
	"application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml":    {"pptx", FamilyPresentation},
	"application/vnd.openxmlformats-officedocument.presentationml.template.main+xml":     {"pptx", FamilyPresentation},
	"application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml":                   {"pptx", FamilyPresentation},
	"application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml":                      {"pptx", FamilyPresentation},
	"application/vnd.ms-powerpoint.template.macroEnabled.main+xml":                       {"pptx", FamilyPresentation},
}

// odfTypes are the ODF mimetypes by format.
var odfTypes = map[string]Format{
	"application/vnd.oasis.opendocument.text":                  {"odt", FamilyText},
	"application/vnd.oasis.opendocument.text-template":         {"odt", FamilyText},
	"application/vnd.oasis.opendocument.spreadsheet":           {"ods", FamilySpreadsheet},
	"application/vnd.oasis.opendocument.spreadsheet-template":  {"ods", FamilySpreadsheet},
	"application/vnd.oasis.opendocument.presentation":          {"odp", FamilyPresentation},
	"application/vnd.oasis.opendocument.presentation-template": {"odp", FamilyPresentation},
}

// guessZip names a ZIP-based format from the raw bytes, for the message
// about a package whose directory cannot be read.
func guessZip(b []byte) string {
	switch {
	case bytes.Contains(b, []byte("word/document")):
		return "DOCX"
	case bytes.Contains(b, []byte("xl/workbook")):
		return "XLSX"
	case bytes.Contains(b, []byte("ppt/presentation")):
		return "PPTX"
	case bytes.Contains(b, []byte("mimetypeapplication/vnd.oasis.opendocument.text")):
		return "ODT"
	case bytes.Contains(b, []byte("mimetypeapplication/vnd.oasis.opendocument.spreadsheet")):
		return "ODS"
	case bytes.Contains(b, []byte("mimetypeapplication/vnd.oasis.opendocument.presentation")):
		return "ODP"
	}
	return "ZIP"
}

func detectZip(doc []byte) (Format, error) {
	zr, err := zip.NewReader(bytes.NewReader(doc), int64(len(doc)))
	if err != nil {
		what := guessZip(doc)
		if what == "ZIP" {
			return Format{}, limits.Unsupported("a damaged ZIP archive")
		}
		return Format{}, limits.Corrupt(what, "its ZIP directory is missing or broken (was the upload cut short?)")
	}
	if len(zr.File) > maxEntries {
		return Format{}, tooLarge(fmt.Sprintf("the file has %d parts, at most %d", len(zr.File), maxEntries))
	}
	files := map[string]*zip.File{}
	var total uint64
	for _, f := range zr.File {
		files[f.Name] = f
		total += f.UncompressedSize64
		if total > limits.MaxOfficeUnpackedBytes {
			return Format{}, tooLarge(fmt.Sprintf("the file unpacks to more than %d bytes (512 MiB)", limits.MaxOfficeUnpackedBytes))
		}
		if f.UncompressedSize64 > ratioFloor && f.UncompressedSize64 > f.CompressedSize64*limits.MaxOfficeRatio {
			return Format{}, tooLarge(fmt.Sprintf("the part %q expands more than %d:1 when unpacked (a zip bomb?)", f.Name, limits.MaxOfficeRatio))
		}
	}
	var format Format
	if f := files["mimetype"]; f != nil {
		mt, err := readPart(f, 256)
		if err != nil {
			return Format{}, limits.Corrupt(guessZip(doc), "its mimetype cannot be read")
		}
		t := strings.TrimSpace(string(mt))
		ft, ok := odfTypes[t]
		if !ok {
			return Format{}, limits.Unsupported(odfOther(t))
		}
		format = ft
		if m := files["META-INF/manifest.xml"]; m != nil {
			b, err := readPart(m, 4<<20)
			if err != nil {
				return Format{}, limits.Corrupt(format.upper(), "its manifest cannot be read")
			}
			if bytes.Contains(b, []byte("encryption-data")) {
				return Format{}, limits.Encrypted()
			}
		}
	} else if f := files["[Content_Types].xml"]; f != nil {
		b, err := readPart(f, 4<<20)
		if err != nil {
			return Format{}, limits.Corrupt(guessZip(doc), "its [Content_Types].xml cannot be read")
		}
		ft, other, err := ooxmlFormat(b)
		if err != nil {
			return Format{}, limits.Corrupt(guessZip(doc), "its [Content_Types].xml is not valid XML")
		}
		if ft.Name == "" {
			return Format{}, limits.Unsupported(other)
		}
		format = ft
	} else {
		if files["META-INF/container.xml"] != nil {
			return Format{}, limits.Unsupported("an EPUB book or another ZIP-based format")
		}
		return Format{}, limits.Unsupported("a ZIP archive")
	}
	// No OOXML part may have a DTD (ECMA-376 Part 2 forbids them), and
	// ODF has only the external ones LibreOffice writes for Basic
	// libraries and dialogs ("module.dtd"): an internal subset (entities:
	// a bomb) or a URL (an external entity waiting for a parser that
	// fetches it) is refused in both.
	odf := files["mimetype"] != nil
	for _, f := range zr.File {
		ext := strings.ToLower(path.Ext(f.Name))
		if ext != ".xml" && ext != ".rels" && ext != ".xlb" && ext != ".xba" && ext != ".xdl" {
			continue
		}
		dtd, err := doctype(f)
		if err != nil {
			return Format{}, limits.Corrupt(format.upper(), fmt.Sprintf("its part %q cannot be read (%v)", f.Name, err))
		}
		if dtd != "" && (!odf || unsafeDTD(dtd)) {
			return Format{}, limits.Corrupt(format.upper(), fmt.Sprintf("its part %q declares a DTD with entities or a URL, which Office files never contain", f.Name))
		}
	}
	return format, nil
}

// unsafeDTD reports whether a DOCTYPE has an internal subset (entity
// declarations) or an identifier that names a URL or an absolute path
// rather than a bare file name like LibreOffice's "module.dtd".
func unsafeDTD(dtd string) bool {
	if strings.Contains(dtd, "[") {
		return true
	}
	// The quoted literals: the public identifier (no URL by its syntax)
	// and the system identifier.
	for i, part := range strings.Split(strings.ReplaceAll(dtd, "'", `"`), `"`) {
		if i%2 == 1 && (strings.Contains(part, ":") || strings.HasPrefix(part, "/")) && !strings.HasPrefix(part, "-//") {
			return true
		}
	}
	return false
}

func odfOther(mimetype string) string {
	switch {
	case strings.Contains(mimetype, "opendocument.graphics"):
		return "an OpenDocument drawing (ODG)"
	case strings.Contains(mimetype, "opendocument.formula"):
		return "an OpenDocument formula (ODF)"
	case strings.Contains(mimetype, "opendocument.base"):
		return "an OpenDocument database (ODB)"
	case strings.Contains(mimetype, "opendocument.chart"):
		return "an OpenDocument chart (ODC)"
	case strings.HasPrefix(mimetype, "application/epub"):
		return "an EPUB book"
	}
	return "a ZIP-based file of type " + strconvQuote(mimetype)
}

func strconvQuote(s string) string {
	if len(s) > 80 {
		s = s[:80]
	}
	return fmt.Sprintf("%q", s)
}

// ooxmlFormat reads [Content_Types].xml: the format of its main part, or
// what else the package is.
func ooxmlFormat(b []byte) (Format, string, error) {
	var ct struct {
		Overrides []struct {
			PartName    string `xml:"PartName,attr"`
			ContentType string `xml:"ContentType,attr"`
		} `xml:"Override"`
	}
	d := xml.NewDecoder(bytes.NewReader(b))
	d.CharsetReader = passCharset
	if err := d.Decode(&ct); err != nil {
		return Format{}, "", err
	}
	other := "an Office Open XML package that is not a document, workbook or presentation"
	for _, o := range ct.Overrides {
		if f, ok := ooxmlTypes[strings.TrimSpace(o.ContentType)]; ok {
			return f, "", nil
		}
		switch {
		case strings.Contains(o.ContentType, "visio"):
			other = "a Visio drawing (VSDX)"
		case strings.Contains(o.ContentType, "xps"):
			other = "an XPS document"
		}
	}
	return Format{}, other, nil
}

// passCharset lets the decoder read a declared non-UTF-8 encoding as it
// is: the prolog and the markup Detect looks at are ASCII.
func passCharset(_ string, r io.Reader) (io.Reader, error) { return r, nil }

// readPart reads one ZIP entry, at most max bytes (more is an error).
func readPart(f *zip.File, max int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }() // read only: nothing to flush
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over %d bytes", f.Name, max)
	}
	return b, nil
}

// doctype reads an XML part up to its root element and returns the
// DOCTYPE declaration before it, "" when there is none. A part whose
// prolog runs past maxProlog is refused as unreadable: no real part has
// one.
func doctype(f *zip.File) (string, error) {
	if f.UncompressedSize64 == 0 {
		return "", nil
	}
	rc, err := f.Open()
	if err != nil {
		return "", err
	}
	defer func() { _ = rc.Close() }() // read only: nothing to flush
	head, err := io.ReadAll(io.LimitReader(rc, maxProlog))
	if err != nil {
		return "", err
	}
	// UTF-16 parts (allowed by OPC, rare) are read as UTF-8 for the
	// prolog.
	if len(head) >= 2 && (head[0] == 0xFF && head[1] == 0xFE || head[0] == 0xFE && head[1] == 0xFF) {
		head = fromUTF16(head)
	}
	d := xml.NewDecoder(bytes.NewReader(head))
	d.CharsetReader = passCharset
	d.Strict = false
	for {
		tok, err := d.RawToken()
		if err != nil {
			if errors.Is(err, io.EOF) && len(head) < maxProlog {
				// A part with no element at all: LibreOffice will say.
				return "", nil
			}
			if i := bytes.Index(head, []byte("<!DOCTYPE")); i >= 0 {
				// Unreadable past a DOCTYPE: refuse it whole.
				return "[" + string(head[i:min(len(head), i+200)]), nil
			}
			return "", fmt.Errorf("no root element in its first %d bytes", maxProlog)
		}
		switch t := tok.(type) {
		case xml.Directive:
			if bytes.HasPrefix(bytes.TrimSpace(t), []byte("DOCTYPE")) {
				return string(t), nil
			}
		case xml.StartElement:
			return "", nil
		}
	}
}

func fromUTF16(b []byte) []byte {
	var order binary.ByteOrder = binary.LittleEndian
	if b[0] == 0xFE {
		order = binary.BigEndian
	}
	u := make([]uint16, 0, len(b)/2)
	for i := 2; i+1 < len(b); i += 2 {
		u = append(u, order.Uint16(b[i:]))
	}
	out := make([]byte, 0, len(u))
	for _, r := range utf16.Decode(u) {
		out = utf8.AppendRune(out, r)
	}
	return out
}

func detectCFB(doc []byte) (Format, error) {
	c, err := openCFB(doc)
	if err != nil {
		return Format{}, limits.Corrupt("Office (OLE2)", "its compound file structure is broken")
	}
	root := c.root()
	_, encInfo := root["EncryptionInfo"]
	_, encPkg := root["EncryptedPackage"]
	switch {
	case encInfo || encPkg:
		// An OOXML document (DOCX, XLSX, PPTX) encrypted with a
		// password, wrapped in a compound file.
		return Format{}, limits.Encrypted()
	case hasEntry(root, "WordDocument"):
		f := Format{Name: "doc", Family: FamilyText}
		fib, err := c.head(root["WordDocument"], 12)
		if err != nil || len(fib) < 12 {
			return Format{}, limits.Corrupt("DOC", "its WordDocument stream cannot be read")
		}
		// FIB base: the flags word at offset 10, fEncrypted = 0x0100
		// (Word 6/95 and 97–2003 alike).
		if binary.LittleEndian.Uint16(fib[10:])&0x0100 != 0 {
			return Format{}, limits.Encrypted()
		}
		return f, nil
	case hasEntry(root, "Workbook") || hasEntry(root, "Book"):
		e, ok := root["Workbook"]
		if !ok {
			e = root["Book"]
		}
		head, err := c.head(e, 64<<10)
		if err != nil {
			return Format{}, limits.Corrupt("XLS", "its Workbook stream cannot be read")
		}
		if xlsEncrypted(head) {
			return Format{}, limits.Encrypted()
		}
		return Format{Name: "xls", Family: FamilySpreadsheet}, nil
	case hasEntry(root, "PowerPoint Document"):
		if hasEntry(root, "EncryptedSummary") {
			return Format{}, limits.Encrypted()
		}
		if cu, ok := root["Current User"]; ok {
			// CurrentUserAtom: headerToken 0xF3D1C4DF marks an encrypted
			// presentation.
			b, err := c.head(cu, 16)
			if err == nil && len(b) >= 16 && binary.LittleEndian.Uint32(b[12:]) == 0xF3D1C4DF {
				return Format{}, limits.Encrypted()
			}
		}
		return Format{Name: "ppt", Family: FamilyPresentation}, nil
	}
	for name := range root {
		if strings.HasPrefix(name, "__substg1.0_") {
			return Format{}, limits.Unsupported("an Outlook message")
		}
	}
	if hasEntry(root, "VisioDocument") {
		return Format{}, limits.Unsupported("a Visio drawing")
	}
	return Format{}, limits.Unsupported("an OLE compound file that is not a Word, Excel or PowerPoint document")
}

func hasEntry(root map[string]cfbEntry, name string) bool {
	e, ok := root[name]
	return ok && e.typ == 2
}

// xlsEncrypted walks the BIFF records of the workbook globals (up to their
// EOF) for a FILEPASS record.
func xlsEncrypted(b []byte) bool {
	for off := 0; off+4 <= len(b); {
		typ := binary.LittleEndian.Uint16(b[off:])
		n := int(binary.LittleEndian.Uint16(b[off+2:]))
		switch typ {
		case 0x002F: // FILEPASS
			return true
		case 0x000A: // EOF of the globals
			return false
		}
		off += 4 + n
	}
	return false
}
