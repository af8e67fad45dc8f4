package forms

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// This file turns qpdf's JSON (version 2) of a PDF into the form model:
// pages, fields and their widgets. qpdf has done the parsing (in its
// sandbox); here we only walk its answer, a tree of plain JSON values in
// which a PDF string is "u:text" or "b:hex", a name "/Name" and an indirect
// reference "12 0 R".

// qdoc is qpdf's JSON of one PDF.
type qdoc struct {
	Pages []struct {
		Object string `json:"object"`
	} `json:"pages"`
	Acroform struct {
		HasAcroform     bool     `json:"hasacroform"`
		NeedAppearances bool     `json:"needappearances"`
		Fields          []qfield `json:"fields"`
	} `json:"acroform"`
	Encrypt struct {
		Encrypted bool `json:"encrypted"`
	} `json:"encrypt"`
	Qpdf []json.RawMessage `json:"qpdf"`

	header  qheader
	objects map[string]qobject
}

type qheader struct {
	PDFVersion  string `json:"pdfversion"`
	MaxObjectID int    `json:"maxobjectid"`
}

type qfield struct {
	Fullname   string `json:"fullname"`
	Fieldtype  string `json:"fieldtype"`
	Fieldflags int64  `json:"fieldflags"`
	Value      any    `json:"value"`
	Quadding   int    `json:"quadding"`
	Page       int    `json:"pageposfrom1"`
	Object     string `json:"object"`
	Annotation struct {
		Object string `json:"object"`
		State  string `json:"appearancestate"`
		Flags  int64  `json:"annotationflags"`
	} `json:"annotation"`
}

type qobject struct {
	Value  any `json:"value"`
	Stream *struct {
		Dict map[string]any `json:"dict"`
	} `json:"stream"`
}

// parseQDoc reads qpdf's JSON.
func parseQDoc(b []byte) (*qdoc, error) {
	var d qdoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("qpdf json: %w", err)
	}
	if len(d.Qpdf) != 2 {
		return nil, fmt.Errorf("qpdf json: %d parts in qpdf", len(d.Qpdf))
	}
	if err := json.Unmarshal(d.Qpdf[0], &d.header); err != nil {
		return nil, fmt.Errorf("qpdf json header: %w", err)
	}
	if err := json.Unmarshal(d.Qpdf[1], &d.objects); err != nil {
		return nil, fmt.Errorf("qpdf json objects: %w", err)
	}
	d.Qpdf = nil
	return &d, nil
}

var refRE = regexp.MustCompile(`^[0-9]+ [0-9]+ R$`)

func isRef(v any) (string, bool) {
	s, ok := v.(string)
	if ok && refRE.MatchString(s) {
		return s, true
	}
	return "", false
}

// resolve follows indirect references (a bounded number of times: a
// reference loop ends as nil).
func (d *qdoc) resolve(v any) any {
	for range 16 {
		ref, ok := isRef(v)
		if !ok {
			return v
		}
		o, ok := d.objects["obj:"+ref]
		if !ok {
			return nil
		}
		if o.Stream != nil {
			return o.Stream.Dict
		}
		v = o.Value
	}
	return nil
}

// dict returns v resolved as a dictionary (a stream's dictionary for a
// stream), or nil.
func (d *qdoc) dict(v any) map[string]any {
	m, _ := d.resolve(v).(map[string]any)
	return m
}

func (d *qdoc) array(v any) []any {
	a, _ := d.resolve(v).([]any)
	return a
}

func (d *qdoc) number(v any) (float64, bool) {
	f, ok := d.resolve(v).(float64)
	return f, ok && !math.IsNaN(f) && !math.IsInf(f, 0)
}

func (d *qdoc) numbers(v any) []float64 {
	a := d.array(v)
	out := make([]float64, 0, len(a))
	for _, e := range a {
		f, ok := d.number(e)
		if !ok {
			return nil
		}
		out = append(out, f)
	}
	return out
}

// text decodes a PDF string ("u:…" is UTF-8 already, "b:…" hex bytes in
// PDFDocEncoding or UTF-16BE with a byte order mark).
func (d *qdoc) text(v any) (string, bool) {
	s, ok := d.resolve(v).(string)
	if !ok {
		return "", false
	}
	switch {
	case strings.HasPrefix(s, "u:"):
		return s[2:], true
	case strings.HasPrefix(s, "b:"):
		raw, err := hex.DecodeString(s[2:])
		if err != nil {
			return "", false
		}
		return decodePDFText(raw), true
	}
	return "", false
}

// name returns a PDF name without its slash (qpdf writes names with #xx
// escapes decoded, as UTF-8 where they are).
func (d *qdoc) name(v any) (string, bool) {
	s, ok := d.resolve(v).(string)
	if !ok || !strings.HasPrefix(s, "/") {
		return "", false
	}
	return s[1:], true
}

func decodePDFText(raw []byte) string {
	if len(raw) >= 2 && raw[0] == 0xFE && raw[1] == 0xFF {
		u := make([]uint16, 0, len(raw)/2)
		for i := 2; i+1 < len(raw); i += 2 {
			u = append(u, uint16(raw[i])<<8|uint16(raw[i+1]))
		}
		return string(utf16.Decode(u))
	}
	// PDFDocEncoding agrees with Latin-1 on the printable range that matters
	// for field values.
	r := make([]rune, len(raw))
	for i, c := range raw {
		r[i] = rune(c)
	}
	return string(r)
}

// inherited looks key up in the field dictionary and its ancestors
// (/Parent), as PDF's inheritable field attributes are.
func (d *qdoc) inherited(obj any, key string) any {
	m := d.dict(obj)
	for range 32 {
		if m == nil {
			return nil
		}
		if v, ok := m[key]; ok {
			return v
		}
		m = d.dict(m["/Parent"])
	}
	return nil
}

// pageInherited is inherited for the page tree's inheritable attributes.
func (d *qdoc) pageInherited(page map[string]any, key string) any {
	m := page
	for range 64 {
		if m == nil {
			return nil
		}
		if v, ok := m[key]; ok {
			return v
		}
		m = d.dict(m["/Parent"])
	}
	return nil
}

// catalog is the document catalog.
func (d *qdoc) catalog() map[string]any {
	t, _ := d.objects["trailer"]
	tm, _ := t.Value.(map[string]any)
	if tm == nil {
		return nil
	}
	return d.dict(tm["/Root"])
}

func (d *qdoc) catalogRef() string {
	t := d.objects["trailer"]
	tm, _ := t.Value.(map[string]any)
	ref, _ := isRef(tm["/Root"])
	return ref
}

// Page is one page of a form: its boxes and rotation.
type page struct {
	ref      string
	media    [4]float64 // normalised: x0 < x1, y0 < y1
	rotate   int        // 0, 90, 180, 270
	annots   []any      // entries of /Annots as qpdf wrote them (references mostly)
	annotRef string     // /Annots when it is an indirect array
}

// Field is one fillable field of a form as users see it.
type Field struct {
	// Name is the fully qualified name ("topmostSubform[0].Page1[0].f1_02[0]").
	Name string `json:"name"`
	// Type is "text", "checkbox", "radio", "choice" or "signature".
	Type string `json:"type"`
	// Value is the current value: a string (text, radio, single choice,
	// a checkbox with several on-states), a bool (checkbox), a list of
	// strings (multiple choice) or null.
	Value any `json:"value"`
	// Options are the export values of a radio group, of a checkbox with
	// several on-states and of a choice field.
	Options []string `json:"options,omitempty"`
	// Labels are the display texts of the options, where a choice field
	// has display texts that differ from the export values.
	Labels []string `json:"labels,omitempty"`
	// Page is the 1-based page of the first widget (0: on no page).
	Page int `json:"page"`
	// Rect is the first widget's rectangle [x0 y0 x1 y1] in PDF points.
	Rect      [4]float64 `json:"rect"`
	Required  bool       `json:"required"`
	ReadOnly  bool       `json:"readOnly"`
	Multiline bool       `json:"multiline"`
	// MaxLen is the most characters a text field takes, 0 for no limit
	// (written as null).
	MaxLen int `json:"-"`
	// Editable marks a combo box that also takes text of its own.
	Editable bool `json:"editable,omitempty"`
	// MultiSelect marks a list that takes several options.
	MultiSelect bool `json:"multiSelect,omitempty"`

	widgets []*widget
	comb    bool
	pass    bool
	quad    int
	flags   int64
	// onStates are the appearance-state names of the on states, in order
	// (buttons); exports maps one to its export value.
	onStates []string
	exports  map[string]string
}

// MarshalJSON writes maxLen as null when there is none.
func (f Field) MarshalJSON() ([]byte, error) {
	type plain Field
	var maxLen any
	if f.MaxLen > 0 {
		maxLen = f.MaxLen
	}
	return json.Marshal(struct {
		plain
		MaxLen any `json:"maxLen"`
	}{plain(f), maxLen})
}

// widget is one widget annotation of a field.
type widget struct {
	ref     string
	page    int // 1-based, 0: none
	rect    [4]float64
	state   string // /AS without the slash
	onState string // the widget's on-state name, buttons only
	da      string
	mk      map[string]any
	bs      map[string]any
	ap      map[string]any // /AP
	flags   int64
	push    bool // a push button's widget (not a field users fill)
}

// Field flags (PDF 32000-1 §12.7.3.1, §12.7.4).
const (
	flagReadOnly    = 1 << 0
	flagRequired    = 1 << 1
	flagMultiline   = 1 << 12
	flagPassword    = 1 << 13
	flagNoToggleOff = 1 << 14
	flagRadio       = 1 << 15
	flagPushbutton  = 1 << 16
	flagCombo       = 1 << 17
	flagEdit        = 1 << 18
	flagMultiSelect = 1 << 21
	flagComb        = 1 << 24
)

// Annotation flags.
const (
	annotHidden = 1 << 1
	annotNoView = 1 << 5
)

// form is a parsed PDF with its fields.
type form struct {
	doc    *qdoc
	pages  []page
	fields []*Field // in document order, fillable fields only
	byName map[string]*Field
	// buttons are the widgets of push buttons (kept for flattening).
	buttons []*widget
	// widgets are every widget annotation the fields list, by reference.
	widgets map[string]*widget
	da      string // /AcroForm /DA
	hasXFA  bool
	// valueStreams are the fields whose /V is a stream, by name.
	valueStreams map[string]string
}

// buildForm makes the form model of d.
func buildForm(d *qdoc) (*form, error) {
	f := &form{doc: d, byName: map[string]*Field{}, widgets: map[string]*widget{}, valueStreams: map[string]string{}}
	cat := d.catalog()
	if cat == nil {
		return nil, invalidPDF("it has no document catalog")
	}
	if af := d.dict(cat["/AcroForm"]); af != nil {
		f.da, _ = d.text(af["/DA"])
		_, f.hasXFA = af["/XFA"]
	}
	for i, p := range d.Pages {
		pd := d.dict(p.Object)
		if pd == nil {
			return nil, invalidPDF(fmt.Sprintf("page %d cannot be read", i+1))
		}
		pg := page{ref: p.Object}
		mb := d.numbers(d.pageInherited(pd, "/MediaBox"))
		if len(mb) != 4 {
			mb = []float64{0, 0, 612, 792}
		}
		pg.media = normRect(mb)
		if r, ok := d.number(d.pageInherited(pd, "/Rotate")); ok {
			pg.rotate = ((int(r) % 360) + 360) % 360 / 90 * 90
		}
		if ref, ok := isRef(pd["/Annots"]); ok {
			pg.annotRef = ref
		}
		pg.annots = d.array(pd["/Annots"])
		f.pages = append(f.pages, pg)
	}
	for _, qf := range d.Acroform.Fields {
		if err := f.addWidget(qf); err != nil {
			return nil, err
		}
	}
	for _, fl := range f.fields {
		f.finish(fl)
	}
	return f, nil
}

func normRect(r []float64) [4]float64 {
	return [4]float64{min(r[0], r[2]), min(r[1], r[3]), max(r[0], r[2]), max(r[1], r[3])}
}

func (f *form) addWidget(qf qfield) error {
	d := f.doc
	wd := d.dict(qf.Annotation.Object)
	if wd == nil {
		return nil
	}
	w := &widget{ref: qf.Annotation.Object, page: qf.Page, flags: qf.Annotation.Flags}
	if r := d.numbers(wd["/Rect"]); len(r) == 4 {
		w.rect = normRect(r)
	}
	w.state, _ = d.name(wd["/AS"])
	if da, ok := d.text(d.inherited(qf.Annotation.Object, "/DA")); ok {
		w.da = da
	} else {
		w.da = f.da
	}
	w.mk = d.dict(wd["/MK"])
	w.bs = d.dict(wd["/BS"])
	w.ap = d.dict(wd["/AP"])
	f.widgets[w.ref] = w

	var typ string
	switch qf.Fieldtype {
	case "/Tx":
		typ = "text"
	case "/Ch":
		typ = "choice"
	case "/Sig":
		typ = "signature"
	case "/Btn":
		switch {
		case qf.Fieldflags&flagPushbutton != 0:
			w.push = true
			f.buttons = append(f.buttons, w)
			return nil
		case qf.Fieldflags&flagRadio != 0:
			typ = "radio"
		default:
			typ = "checkbox"
		}
		for k := range d.dict(w.ap["/N"]) {
			if k != "/Off" && strings.HasPrefix(k, "/") {
				w.onState = k[1:]
				break
			}
		}
	default:
		return nil // a widget of no known field type: dropped when flattening
	}
	name := qf.Fullname
	fl := f.byName[name]
	if fl == nil {
		fl = &Field{Name: name, Type: typ, Page: w.page, Rect: w.rect, flags: qf.Fieldflags, quad: qf.Quadding}
		fl.Required = qf.Fieldflags&flagRequired != 0
		fl.ReadOnly = qf.Fieldflags&flagReadOnly != 0
		fl.Multiline = typ == "text" && qf.Fieldflags&flagMultiline != 0
		fl.comb = typ == "text" && qf.Fieldflags&(flagComb|flagMultiline|flagPassword) == flagComb
		fl.pass = typ == "text" && qf.Fieldflags&flagPassword != 0
		fl.Editable = typ == "choice" && qf.Fieldflags&flagCombo != 0 && qf.Fieldflags&flagEdit != 0
		fl.MultiSelect = typ == "choice" && qf.Fieldflags&flagMultiSelect != 0
		if n, ok := d.number(d.inherited(qf.Annotation.Object, "/MaxLen")); ok && n > 0 {
			fl.MaxLen = int(n)
		}
		if !fl.comb || fl.MaxLen == 0 {
			fl.comb = false
		}
		fl.Value = f.currentValue(qf)
		f.byName[name] = fl
		f.fields = append(f.fields, fl)
	}
	fl.widgets = append(fl.widgets, w)
	return nil
}

// currentValue is the field's /V as users see it (buttons are finished in
// finish, once every widget is known).
func (f *form) currentValue(qf qfield) any {
	d := f.doc
	v := d.resolve(qf.Value)
	switch qf.Fieldtype {
	case "/Tx", "/Ch":
		if a, ok := v.([]any); ok {
			var out []string
			for _, e := range a {
				if s, ok := d.text(e); ok {
					out = append(out, s)
				}
			}
			return out
		}
		if s, ok := d.text(v); ok {
			return s
		}
		if ref, ok := isRef(qf.Value); ok {
			// A text value in a stream (rare, rich text): qpdf's JSON
			// lists no stream data, so read.go fetches it.
			f.valueStreams[qf.Fullname] = ref
			return nil
		}
	case "/Btn":
		if s, ok := d.name(v); ok {
			return s
		}
	}
	return nil
}

// finish completes a field once all its widgets are known: options,
// export values, the button value in users' terms.
func (f *form) finish(fl *Field) {
	d := f.doc
	first := fl.widgets[0]
	switch fl.Type {
	case "choice":
		for _, o := range d.array(d.inherited(first.ref, "/Opt")) {
			if pair := d.array(o); len(pair) == 2 {
				e, _ := d.text(pair[0])
				l, _ := d.text(pair[1])
				fl.Options = append(fl.Options, e)
				fl.Labels = append(fl.Labels, l)
				continue
			}
			s, _ := d.text(o)
			fl.Options = append(fl.Options, s)
			fl.Labels = append(fl.Labels, s)
		}
		if slices.Equal(fl.Options, fl.Labels) {
			fl.Labels = nil
		}
		if fl.MultiSelect {
			switch v := fl.Value.(type) {
			case string:
				fl.Value = []string{v}
			case nil:
				fl.Value = []string{}
			}
		}
	case "checkbox", "radio":
		opt := d.array(d.inherited(first.ref, "/Opt"))
		fl.exports = map[string]string{}
		for i, w := range fl.widgets {
			if w.onState == "" || slices.Contains(fl.onStates, w.onState) {
				continue
			}
			fl.onStates = append(fl.onStates, w.onState)
			export := w.onState
			if len(opt) > 0 {
				// With /Opt the on-state names are indices (or the widget
				// order is), and /Opt holds the export values.
				idx := i
				if n, err := strconv.Atoi(w.onState); err == nil {
					idx = n
				}
				if idx >= 0 && idx < len(opt) {
					if s, ok := d.text(opt[idx]); ok {
						export = s
					}
				}
			}
			fl.exports[w.onState] = export
			fl.Options = append(fl.Options, export)
		}
		state, _ := fl.Value.(string)
		on := state != "" && state != "Off" && slices.Contains(fl.onStates, state)
		switch {
		case fl.Type == "checkbox" && len(fl.onStates) <= 1:
			fl.Value = on
			fl.Options = nil
		case on:
			fl.Value = fl.exports[state]
		case fl.Type == "checkbox":
			fl.Value = false
		default:
			fl.Value = nil
		}
		fl.setState(state, on)
	case "signature":
		fl.Value = nil
	}
}

// setState records the appearance state every widget of a button field
// shows for the field state (an on-state name, or "Off").
func (fl *Field) setState(state string, on bool) {
	for _, w := range fl.widgets {
		if on && w.onState == state {
			w.state = state
		} else {
			w.state = "Off"
		}
	}
}

// b64 encodes stream data for qpdf's JSON.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
