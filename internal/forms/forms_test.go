package forms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

// The tests fill real forms of other producers (../shared/forms, read from
// there, never copied) and forms made here, and check the results with
// independent tools only: pdfinfo, qpdf --json, pdftotext -bbox, pdffonts,
// pdftoppm.

func newTestFiller(t *testing.T) *Filler {
	t.Helper()
	testenv.Require(t, "xelatex", "qpdf", "prlimit", "pdfinfo", "pdftotext", "pdffonts", "pdftoppm")
	r, err := tex.NewRunner(tex.RunnerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{}, r)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func sharedForm(t *testing.T, name string) []byte {
	t.Helper()
	dir := testenv.SharedDir(t, "../..")
	if dir == "" {
		testenv.Missing(t, "../shared is absent")
	}
	b, err := os.ReadFile(filepath.Join(dir, "forms", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		// qpdf exits 3 for warnings only.
		if !(errors.As(err, &ee) && name == "qpdf" && ee.ExitCode() == 3) {
			t.Fatalf("%s %v: %v", name, args, err)
		}
	}
	return string(out)
}

func writeTemp(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pageGeom is a page as pdfinfo reports it.
type pageGeom struct {
	size string
	rot  int
}

func pageInfo(t *testing.T, path string) []pageGeom {
	t.Helper()
	out := run(t, "pdfinfo", "-f", "1", "-l", "1000", path)
	sizeRE := regexp.MustCompile(`(?m)^Page\s+(\d+) size:\s+(.*?)\s*$`)
	rotRE := regexp.MustCompile(`(?m)^Page\s+(\d+) rot:\s+(\d+)`)
	var pages []pageGeom
	for _, m := range sizeRE.FindAllStringSubmatch(out, -1) {
		pages = append(pages, pageGeom{size: m[2]})
	}
	for i, m := range rotRE.FindAllStringSubmatch(out, -1) {
		pages[i].rot, _ = strconv.Atoi(m[2])
	}
	return pages
}

// widgetRect is a widget as qpdf lists it in the original form.
type widgetRect struct {
	page int
	rect [4]float64
}

// originalWidgets reads every field's widget rectangles with qpdf.
func originalWidgets(t *testing.T, path string) map[string][]widgetRect {
	t.Helper()
	var j struct {
		Acroform struct {
			Fields []struct {
				Fullname   string `json:"fullname"`
				Page       int    `json:"pageposfrom1"`
				Annotation struct {
					Object string `json:"object"`
				} `json:"annotation"`
			} `json:"fields"`
		} `json:"acroform"`
		Qpdf []json.RawMessage `json:"qpdf"`
	}
	if err := json.Unmarshal([]byte(run(t, "qpdf", "--json=2", "--json-stream-data=none", path)), &j); err != nil {
		t.Fatal(err)
	}
	var objs map[string]struct {
		Value map[string]any `json:"value"`
	}
	// An object whose value is not a dictionary (an array, a number) does
	// not fit objs and makes Unmarshal report a type error after it filled
	// the rest; the dictionaries are all this reads.
	_ = json.Unmarshal(j.Qpdf[1], &objs)
	out := map[string][]widgetRect{}
	for _, f := range j.Acroform.Fields {
		r, _ := objs["obj:"+f.Annotation.Object].Value["/Rect"].([]any)
		if len(r) != 4 {
			continue
		}
		var w widgetRect
		w.page = f.Page
		for i := range 4 {
			w.rect[i], _ = r[i].(float64)
		}
		w.rect = [4]float64{min(w.rect[0], w.rect[2]), min(w.rect[1], w.rect[3]), max(w.rect[0], w.rect[2]), max(w.rect[1], w.rect[3])}
		out[f.Fullname] = append(out[f.Fullname], w)
	}
	return out
}

// mediaBoxes reads each page's media box and rotation with qpdf.
func mediaBoxes(t *testing.T, path string) [][5]float64 {
	t.Helper()
	var j struct {
		Pages []struct {
			Object string `json:"object"`
		} `json:"pages"`
		Qpdf []json.RawMessage `json:"qpdf"`
	}
	if err := json.Unmarshal([]byte(run(t, "qpdf", "--json=2", "--json-stream-data=none", "--json-key=pages", "--json-key=qpdf", path)), &j); err != nil {
		t.Fatal(err)
	}
	var objs map[string]struct {
		Value map[string]any `json:"value"`
	}
	// As above: non-dictionary objects are type errors; dictionaries are read.
	_ = json.Unmarshal(j.Qpdf[1], &objs)
	var out [][5]float64
	for _, p := range j.Pages {
		d := objs["obj:"+p.Object].Value
		var b [5]float64
		for range 20 {
			if mb, ok := d["/MediaBox"].([]any); ok && b[2] == 0 {
				for i := range 4 {
					b[i], _ = mb[i].(float64)
				}
			}
			if r, ok := d["/Rotate"].(float64); ok && b[4] == 0 {
				b[4] = r
			}
			parent, _ := d["/Parent"].(string)
			if parent == "" {
				break
			}
			d = objs["obj:"+parent].Value
		}
		out = append(out, b)
	}
	return out
}

// bboxWord is a word pdftotext -bbox found.
type bboxWord struct {
	page                   int
	xMin, yMin, xMax, yMax float64
	text                   string
}

func bboxWords(t *testing.T, path string) []bboxWord {
	t.Helper()
	out := run(t, "pdftotext", "-bbox", path, "-")
	pageRE := regexp.MustCompile(`<page |<word xMin="([0-9.]+)" yMin="([0-9.]+)" xMax="([0-9.]+)" yMax="([0-9.]+)">([^<]*)</word>`)
	var words []bboxWord
	page := 0
	for _, m := range pageRE.FindAllStringSubmatch(out, -1) {
		if m[0] == "<page " {
			page++
			continue
		}
		w := bboxWord{page: page, text: htmlUnescape(m[5])}
		w.xMin, _ = strconv.ParseFloat(m[1], 64)
		w.yMin, _ = strconv.ParseFloat(m[2], 64)
		w.xMax, _ = strconv.ParseFloat(m[3], 64)
		w.yMax, _ = strconv.ParseFloat(m[4], 64)
		words = append(words, w)
	}
	return words
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'").Replace(s)
}

// displayRect maps a rectangle in a page's user space to the coordinates
// pdftotext reports: origin at the top left of the page as displayed
// (after /Rotate), y downwards.
func displayRect(r [4]float64, box [5]float64) [4]float64 {
	x0, y0 := box[0], box[1]
	w, h := box[2]-box[0], box[3]-box[1]
	pt := func(x, y float64) (float64, float64) {
		x, y = x-x0, y-y0
		switch int(box[4]) % 360 {
		case 90:
			return y, x
		case 180:
			return w - x, y
		case 270:
			return h - y, w - x
		}
		return x, h - y
	}
	ax, ay := pt(r[0], r[1])
	bx, by := pt(r[2], r[3])
	return [4]float64{min(ax, bx), min(ay, by), max(ax, bx), max(ay, by)}
}

// fold normalises text for comparison: NFC (Arabic must come back as
// letters, not presentation forms), bidi controls and spaces dropped.
func fold(s string) string {
	s = norm.NFC.String(s)
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.Is(unicode.Bidi_Control, r) || r == 0x200C || r == 0x200D {
			return -1
		}
		return r
	}, s)
}

func sortedRunes(s string) string {
	r := []rune(s)
	slices.Sort(r)
	return string(r)
}

// checkFlattened makes the checks every filled form must pass.
func checkFlattened(t *testing.T, origPath, outPath string) {
	t.Helper()
	if got, want := pageInfo(t, outPath), pageInfo(t, origPath); !slices.Equal(got, want) {
		t.Errorf("pages (size, rotation) = %v, want %v", got, want)
	}
	var j struct {
		Acroform struct {
			Fields      []any `json:"fields"`
			HasAcroform bool  `json:"hasacroform"`
		} `json:"acroform"`
		Qpdf []json.RawMessage `json:"qpdf"`
	}
	if err := json.Unmarshal([]byte(run(t, "qpdf", "--json=2", "--json-stream-data=none", outPath)), &j); err != nil {
		t.Fatal(err)
	}
	if j.Acroform.HasAcroform || len(j.Acroform.Fields) > 0 {
		t.Errorf("qpdf: hasacroform %v, %d fields left", j.Acroform.HasAcroform, len(j.Acroform.Fields))
	}
	// No page has a widget annotation left (a widget object may stay
	// reachable from elsewhere, a structure tree, but is no annotation).
	var objs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal(j.Qpdf[1], &objs); err != nil {
		t.Fatal(err)
	}
	dict := func(ref any) map[string]any {
		s, _ := ref.(string)
		m, _ := objs["obj:"+s].Value.(map[string]any)
		return m
	}
	pages := 0
	for key, o := range objs {
		pd, _ := o.Value.(map[string]any)
		if pd["/Type"] != "/Page" {
			continue
		}
		pages++
		annots, _ := pd["/Annots"].([]any)
		if ref, ok := pd["/Annots"].(string); ok {
			annots, _ = objs["obj:"+ref].Value.([]any)
		}
		for _, a := range annots {
			if dict(a)["/Subtype"] == "/Widget" {
				t.Errorf("qpdf: page %s still has widget annotation %v", key, a)
			}
		}
	}
	if pages == 0 {
		t.Errorf("qpdf: no page objects found")
	}
	if bytes.Contains(j.Qpdf[1], []byte(`"/XFA"`)) {
		t.Errorf("qpdf: XFA is left")
	}
	// Every font the fill added is embedded: what is not embedded was
	// already in the form's page content.
	unembedded := func(path string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(run(t, "pdffonts", path), "\n")[2:] {
			f := strings.Fields(l)
			if len(f) >= 7 && f[len(f)-5] == "no" {
				m[f[0]] = true
			}
		}
		return m
	}
	before := unembedded(origPath)
	for name := range unembedded(outPath) {
		if !before[name] {
			t.Errorf("pdffonts: %s is not embedded and was not in the form", name)
		}
	}
	if out := run(t, "qpdf", "--check", outPath); !strings.Contains(out, "No syntax or stream encoding errors") {
		t.Errorf("qpdf --check: %s", out)
	}
}

// checkValues checks that each value's characters are drawn inside its
// widget (pdftotext -bbox, page rotation applied) and that its words are in
// the text in reading order.
func checkValues(t *testing.T, origPath, outPath string, values map[string]string) {
	t.Helper()
	widgets := originalWidgets(t, origPath)
	boxes := mediaBoxes(t, origPath)
	words := bboxWords(t, outPath)
	text := fold(run(t, "pdftotext", outPath, "-"))
	for name, v := range values {
		ws := widgets[name]
		if len(ws) == 0 {
			t.Errorf("%q: no widget in the original", name)
			continue
		}
		w := ws[0]
		r := displayRect(w.rect, boxes[w.page-1])
		var inside strings.Builder
		for _, wd := range words {
			cx, cy := (wd.xMin+wd.xMax)/2, (wd.yMin+wd.yMax)/2
			if wd.page == w.page && cx >= r[0]-1 && cx <= r[2]+1 && cy >= r[1]-1 && cy <= r[3]+1 {
				inside.WriteString(wd.text)
			}
		}
		if got, want := sortedRunes(fold(inside.String())), sortedRunes(fold(v)); got != want {
			t.Errorf("%q: text inside the widget %v (page %d) = %q, want the characters of %q", name, r, w.page, fold(inside.String()), v)
		}
		for _, word := range strings.Fields(v) {
			if !strings.Contains(text, fold(word)) {
				t.Errorf("%q: word %q not in the text", name, word)
			}
		}
	}
}

func TestFillSharedForms(t *testing.T) {
	f := newTestFiller(t)
	cases := []struct {
		file   string
		values map[string]any
		// shown are values (given or kept) to find inside their widget.
		shown map[string]string
	}{
		{
			file: "acrobat-textfields.pdf",
			values: map[string]any{
				"Text3": "Grüße aus Zürich", "Text4": "東京都 渋谷区\n日本語のテキスト", "Text5": "12345678901",
				"Text6": "مرحبا بالعالم", "Text7": "שלום עולם", "Text8": "नमस्ते", "Text9": "สวัสดีครับ", "Text10": "right aligned",
			},
		},
		{
			file: "libreoffice.pdf",
			values: map[string]any{
				"Text Box 1": "नमस्ते भारत", "Text Box 2": "ภาษาไทย", "r1": "3", "r2": "1", "Check Box 1": true, "Check Box 3": false,
			},
		},
		{
			file:   "hyperref.pdf",
			values: map[string]any{"Name": "李小龍 Bruce", "Check": true},
		},
		{
			file:   "openoffice.pdf",
			values: map[string]any{"lastName": "גרסיה", "country": "France", "databases": []any{"oracle"}},
			shown:  map[string]string{"firstName": "Lucía", "yearsOfExperience": "6", "jobDescription": "UX Designer"},
		},
		{
			file: "acrobat-emoji.pdf",
			values: map[string]any{
				"First Name 🚀": "Ada", "Historical Figures 🐺": "Ada Lovelace 💻", "Which Are Planets? 🌎": "Earth",
			},
			shown: map[string]string{"LastName 🛩": "Lightningtwirls"},
		},
		{
			file:   "indesign.pdf",
			values: map[string]any{"Age": "42", "Eyes": "زرقاء"},
		},
		{file: "flattened.pdf", values: map[string]any{}},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".pdf"), func(t *testing.T) {
			orig := sharedForm(t, c.file)
			origPath := writeTemp(t, c.file, orig)
			vals, _ := json.Marshal(c.values)
			res, err := f.Fill(context.Background(), orig, vals, nil)
			if err != nil {
				t.Fatalf("Fill: %v", err)
			}
			outPath := writeTemp(t, "out.pdf", res.PDF)
			checkFlattened(t, origPath, outPath)
			want := map[string]string{}
			for k, v := range c.values {
				if s, ok := v.(string); ok {
					want[k] = s
				}
			}
			for k, v := range c.shown {
				want[k] = v
			}
			// A radio group or choice shows its display text, not checked here.
			for _, k := range []string{"r1", "r2", "Historical Figures 🐺", "Which Are Planets? 🌎", "country"} {
				delete(want, k)
			}
			checkValues(t, origPath, outPath, want)
			if c.file == "flattened.pdf" {
				if got, want := run(t, "pdftotext", outPath, "-"), run(t, "pdftotext", origPath, "-"); got != want {
					t.Errorf("text of the already flattened form changed:\n%s\nwant\n%s", got, want)
				}
			}
		})
	}
}

func TestFillRotated(t *testing.T) {
	f := newTestFiller(t)
	orig := sharedForm(t, "acrobat-rotated.pdf")
	origPath := writeTemp(t, "rotated.pdf", orig)
	fields, err := f.Fields(context.Background(), orig)
	if err != nil {
		t.Fatal(err)
	}
	if len(fields) != 32 {
		t.Fatalf("Fields = %d fields, want 32", len(fields))
	}
	values := map[string]string{}
	for _, fl := range fields {
		parts := strings.Split(fl.Name, ".")
		values[fl.Name] = parts[0] + " " + parts[3]
	}
	vals, _ := json.Marshal(values)
	res, err := f.Fill(context.Background(), orig, vals, nil)
	if err != nil {
		t.Fatal(err)
	}
	outPath := writeTemp(t, "out.pdf", res.PDF)
	checkFlattened(t, origPath, outPath)
	checkValues(t, origPath, outPath, values)
}

// darkness is the mean darkness (0 white … 255 black) of a rectangle of a
// page, rendered by pdftoppm at 72 dpi in grey.
func darkness(t *testing.T, path string, page int, r [4]float64, pageHeight float64) float64 {
	t.Helper()
	dir := t.TempDir()
	x, y := int(r[0]), int(pageHeight-r[3])
	w, h := int(r[2]-r[0])+1, int(r[3]-r[1])+1
	run(t, "pdftoppm", "-gray", "-r", "72", "-f", strconv.Itoa(page), "-l", strconv.Itoa(page),
		"-x", strconv.Itoa(x), "-y", strconv.Itoa(y), "-W", strconv.Itoa(w), "-H", strconv.Itoa(h), path, filepath.Join(dir, "crop"))
	matches, _ := filepath.Glob(filepath.Join(dir, "crop*.pgm"))
	if len(matches) != 1 {
		t.Fatalf("pdftoppm made %v", matches)
	}
	b, _ := os.ReadFile(matches[0])
	// P5 header: magic, width, height, maxval, one whitespace, pixels.
	fields := 0
	i := 0
	for fields < 4 && i < len(b) {
		for i < len(b) && (b[i] == ' ' || b[i] == '\n') {
			i++
		}
		for i < len(b) && b[i] != ' ' && b[i] != '\n' {
			i++
		}
		fields++
	}
	px := b[i+1:]
	sum := 0
	for _, p := range px {
		sum += 255 - int(p)
	}
	return float64(sum) / float64(max(len(px), 1))
}

func TestFillCheckboxes(t *testing.T) {
	f := newTestFiller(t)
	for _, c := range []struct {
		file     string
		on, off  string
		values   map[string]any
		pageSize float64
	}{
		// Acrobat's check marks are ZapfDingbats text: redrawn.
		{"acrobat-basic.pdf", "Checkbox", "Checkbox-DefaultValue", map[string]any{"Checkbox": true, "Checkbox-DefaultValue": false}, 792},
		// LibreOffice's, kept from the form's own on-state appearance or redrawn.
		{"libreoffice.pdf", "Check Box 1", "Check Box 2", map[string]any{"Check Box 1": true, "Check Box 2": false}, 791.972},
		{"hyperref.pdf", "Check", "", map[string]any{"Check": true}, 792},
	} {
		t.Run(c.file, func(t *testing.T) {
			orig := sharedForm(t, c.file)
			origPath := writeTemp(t, c.file, orig)
			vals, _ := json.Marshal(c.values)
			res, err := f.Fill(context.Background(), orig, vals, nil)
			if err != nil {
				t.Fatal(err)
			}
			out := writeTemp(t, "out.pdf", res.PDF)
			ws := originalWidgets(t, origPath)
			on := ws[c.on][0]
			dOn := darkness(t, out, on.page, on.rect, c.pageSize)
			var dOff float64
			if c.off != "" {
				off := ws[c.off][0]
				dOff = darkness(t, out, off.page, off.rect, c.pageSize)
			} else {
				// Unchecked: the same form filled with false.
				vals, _ := json.Marshal(map[string]any{c.on: false})
				res2, err := f.Fill(context.Background(), orig, vals, nil)
				if err != nil {
					t.Fatal(err)
				}
				dOff = darkness(t, writeTemp(t, "off.pdf", res2.PDF), on.page, on.rect, c.pageSize)
			}
			if dOn < dOff+10 {
				t.Errorf("darkness of checked %q = %.1f, unchecked %.1f: want the checked one visibly darker", c.on, dOn, dOff)
			}
		})
	}
}

func TestFillLiveCycle(t *testing.T) {
	f := newTestFiller(t)
	orig := sharedForm(t, "livecycle-1040.pdf")
	origPath := writeTemp(t, "1040.pdf", orig)
	values := map[string]any{
		"topmostSubform[0].Page1[0].f1_02[0]":                                "Zoë",
		"topmostSubform[0].Page1[0].f1_03[0]":                                "Müller",
		"topmostSubform[0].Page1[0].YourSocial_ReadOrderControl[0].f1_04[0]": "123456789",
		"topmostSubform[0].Page1[0].FilingStatus[0].c1_01[0]":                true,
	}
	vals, _ := json.Marshal(values)
	res, err := f.Fill(context.Background(), orig, vals, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := writeTemp(t, "out.pdf", res.PDF)
	checkFlattened(t, origPath, out)
	checkValues(t, origPath, out, map[string]string{
		"topmostSubform[0].Page1[0].f1_02[0]":                                "Zoë",
		"topmostSubform[0].Page1[0].f1_03[0]":                                "Müller",
		"topmostSubform[0].Page1[0].YourSocial_ReadOrderControl[0].f1_04[0]": "123456789",
	})
}

func problemsOf(t *testing.T, err error) (limits.Kind, []limits.Problem) {
	t.Helper()
	var le *limits.Error
	if !errors.As(err, &le) {
		t.Fatalf("error = %v (%T), want a *limits.Error", err, err)
	}
	return le.Kind, le.Problems
}

func TestBadPDFs(t *testing.T) {
	f := newTestFiller(t)
	for _, c := range []struct {
		name string
		pdf  []byte
		want string
	}{
		{"not-a-pdf.pdf", nil, "not a PDF"},
		{"empty.pdf", nil, "empty"},
		{"damaged-truncated.pdf", nil, "damaged"},
		{"encrypted", encryptedPDF(t), "password"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pdf := c.pdf
			if pdf == nil {
				pdf = sharedForm(t, c.name)
			}
			_, err := f.Fill(context.Background(), pdf, []byte(`{"a": "b"}`), nil)
			kind, ps := problemsOf(t, err)
			if kind != limits.KindDocument || len(ps) != 1 || ps[0].Code != CodeInvalidPDF || ps[0].Field != "pdf" || !strings.Contains(ps[0].Message, c.want) {
				t.Errorf("Fill(%s) = %s %+v, want document invalid_pdf mentioning %q", c.name, kind, ps, c.want)
			}
			_, err = f.Fields(context.Background(), pdf)
			if kind, ps := problemsOf(t, err); kind != limits.KindDocument || ps[0].Code != CodeInvalidPDF {
				t.Errorf("Fields(%s) = %s %+v, want document invalid_pdf", c.name, kind, ps)
			}
		})
	}
}

// encryptedPDF is the hyperref form encrypted with a user password.
func encryptedPDF(t *testing.T) []byte {
	t.Helper()
	in := writeTemp(t, "in.pdf", sharedForm(t, "hyperref.pdf"))
	out := filepath.Join(t.TempDir(), "enc.pdf")
	run(t, "qpdf", "--encrypt", "user", "owner", "256", "--", in, out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValueProblemsAllAtOnce(t *testing.T) {
	f := newTestFiller(t)
	orig := sharedForm(t, "acrobat-basic.pdf")
	values := `{
  "TextField": "fine",
  "NoSuchField": "x",
  "Checkbox": "yes please",
  "ComboBox-DefaultValue": "Opt09",
  "Signature": "John",
  "PushButton": "press",
  "ListBox-DefaultValue": 7
}`
	_, err := f.Fill(context.Background(), orig, []byte(values), nil)
	kind, ps := problemsOf(t, err)
	if kind != limits.KindDocument {
		t.Fatalf("kind = %q, want %q", kind, limits.KindDocument)
	}
	want := []struct {
		field, code string
		line        int
		mention     string
	}{
		{"NoSuchField", CodeUnknownField, 3, "NoSuchField"},
		{"Checkbox", CodeInvalidValue, 4, "true or false"},
		{"ComboBox-DefaultValue", CodeInvalidValue, 5, `"Opt01", "Opt02", "Opt03"`},
		{"Signature", CodeInvalidValue, 6, "signature"},
		{"PushButton", CodeUnknownField, 7, "PushButton"},
		{"ListBox-DefaultValue", CodeInvalidValue, 8, "option"},
	}
	if len(ps) != len(want) {
		t.Fatalf("problems = %+v, want %d", ps, len(want))
	}
	for i, w := range want {
		p := ps[i]
		if p.Field != w.field || p.Code != w.code || p.Line != w.line || !strings.Contains(p.Message, w.mention) {
			t.Errorf("problem %d = %+v, want field %q code %s line %d mentioning %q", i, p, w.field, w.code, w.line, w.mention)
		}
	}
	// Text over maxLen (openoffice: 40).
	_, err = f.Fill(context.Background(), sharedForm(t, "openoffice.pdf"), []byte(`{"firstName": "`+strings.Repeat("é", 41)+`"}`), nil)
	if _, ps := problemsOf(t, err); len(ps) != 1 || ps[0].Code != CodeInvalidValue || !strings.Contains(ps[0].Message, "at most 40") || ps[0].Line != 1 {
		t.Errorf("maxLen problem = %+v", ps)
	}
	// Letters no installed font has (Linear B): named, not dropped.
	_, err = f.Fill(context.Background(), sharedForm(t, "openoffice.pdf"), []byte(`{"firstName": "Ana 𐀀𐀁"}`), nil)
	if _, ps := problemsOf(t, err); len(ps) != 1 || ps[0].Field != "firstName" || !strings.Contains(ps[0].Message, "Linear B") {
		t.Errorf("unprintable value problem = %+v, want one naming Linear B", ps)
	}
	// Malformed JSON: its line.
	_, err = f.Fill(context.Background(), orig, []byte("{\n\"a\": 1,\n}"), nil)
	if _, ps := problemsOf(t, err); len(ps) != 1 || ps[0].Field != "values" || ps[0].Line != 3 {
		t.Errorf("malformed values problem = %+v, want one on line 3", ps)
	}
}

func TestFieldsListing(t *testing.T) {
	f := newTestFiller(t)
	fields, err := f.Fields(context.Background(), sharedForm(t, "openoffice.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Field{}
	for _, fl := range fields {
		byName[fl.Name] = fl
	}
	checks := []struct {
		name, typ string
		value     any
	}{
		{"firstName", "text", "Lucía"},
		{"country", "choice", "Spain"},
		{"javaScript", "checkbox", true},
		{"cSharp", "checkbox", false},
		{"educationLevel", "radio", "bachelorDegree"},
	}
	for _, c := range checks {
		fl, ok := byName[c.name]
		if !ok {
			t.Errorf("Fields: no %q", c.name)
			continue
		}
		if fl.Type != c.typ || fmt.Sprint(fl.Value) != fmt.Sprint(c.value) || fl.Page != 1 {
			t.Errorf("Fields[%q] = %s %v page %d, want %s %v page 1", c.name, fl.Type, fl.Value, fl.Page, c.typ, c.value)
		}
	}
	if fl := byName["firstName"]; fl.MaxLen != 40 {
		t.Errorf("firstName maxLen = %d, want 40", fl.MaxLen)
	}
	if fl := byName["databases"]; !fl.MultiSelect || len(fl.Options) != 4 || fl.Labels[1] != "SQL Server" || fmt.Sprint(fl.Value) != "[oracle db2 sqlServer]" {
		t.Errorf("databases = %+v, want a multi-select list with 4 options, labels and 3 chosen", fl)
	}
	b, _ := json.Marshal(byName["firstName"])
	for _, key := range []string{`"name":"firstName"`, `"type":"text"`, `"maxLen":40`, `"rect":[`, `"required":`, `"readOnly":`, `"multiline":false`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("JSON of a field = %s, want %s", b, key)
		}
	}
}

// TestFillLongValues: values at the 64 KiB bound, in a one-line and a
// multiline field, and the form's own value kept in a stream (acrobat-basic,
// over 64 KiB), come out as a PDF: shrunk and cut to what can be read, never
// a TeX error.
func TestFillLongValues(t *testing.T) {
	f := newTestFiller(t)
	long := strings.Repeat("Grüße 東京 ", MaxValueBytes/16)
	vals, _ := json.Marshal(map[string]string{"Text3": long, "Text4": long})
	if len(long) > MaxValueBytes {
		t.Fatalf("test value has %d bytes, over the bound", len(long))
	}
	for _, c := range []struct {
		file   string
		values []byte
	}{
		{"acrobat-textfields.pdf", vals},
		{"acrobat-basic.pdf", []byte(`{}`)},
	} {
		orig := sharedForm(t, c.file)
		res, err := f.Fill(context.Background(), orig, c.values, nil)
		if err != nil {
			t.Fatalf("Fill(%s) with long values: %v", c.file, err)
		}
		out := writeTemp(t, "out.pdf", res.PDF)
		checkFlattened(t, writeTemp(t, c.file, orig), out)
		if text := run(t, "pdftotext", out, "-"); !strings.Contains(text, "Grüße") && !strings.Contains(text, "Lorem ipsum") {
			t.Errorf("%s: the long value is not in the text", c.file)
		}
	}
}

// TestOverlayFontsCoverMarkdownKeys: every font key script's runs can
// name has an XeTeX font in the overlay, so a new fallback font in script
// cannot silently lose its glyphs here.
func TestOverlayFontsCoverMarkdownKeys(t *testing.T) {
	keys := fallbackKeys()
	if len(keys) == 0 {
		t.Fatal("fallbackKeys() = none")
	}
	for _, k := range keys {
		if _, ok := overlayFonts[k]; !ok {
			t.Errorf("overlayFonts[%q] missing", k)
		}
	}
}
