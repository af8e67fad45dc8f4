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

	"github.com/outprint/outprint/internal/limits"
)

// This file turns qpdf's JSON (version 2) of a PDF into the form model:
// pages, fields and their widgets. qpdf has done the parsing (in its
// sandbox); here we only walk its answer, a tree of plain JSON values in
// which a PDF string is "u:text" or "b:hex", a name "/Name" and an indirect
// reference "12 0 R".

// qdoc is qpdf's JSON of one PDF: the page and field lists of the second
// pass, and every object of the first (read.go).
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

	header qheader
	// raw holds each object's JSON text by key ("obj:12 0 R", "trailer");
	// objects the ones decoded so far. The model looks at a few hundred
	// objects of a form that may have a hundred thousand.
	raw     map[string]json.RawMessage
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

// parseQDoc reads qpdf's JSON of the second pass (pages, acroform,
// encrypt) and takes the objects of the first.
func parseQDoc(b []byte, objs *qobjects) (*qdoc, error) {
	var d qdoc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("qpdf json: %w", err)
	}
	d.header = objs.header
	d.raw = objs.raw
	d.objects = map[string]qobject{}
	return &d, nil
}

// object returns the object of key ("obj:12 0 R", "trailer"), decoding it
// the first time. An object that does not decode is absent.
func (d *qdoc) object(key string) (qobject, bool) {
	if o, ok := d.objects[key]; ok {
		return o, true
	}
	raw, ok := d.raw[key]
	if !ok {
		return qobject{}, false
	}
	var o qobject
	if err := json.Unmarshal(raw, &o); err != nil {
		return qobject{}, false
	}
	d.objects[key] = o
	return o, true
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
		o, ok := d.object("obj:" + ref)
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
	t, _ := d.object("trailer")
	tm, _ := t.Value.(map[string]any)
	if tm == nil {
		return nil
	}
	return d.dict(tm["/Root"])
}

func (d *qdoc) catalogRef() string {
	t, _ := d.object("trailer")
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

// UnmarshalJSON reads what MarshalJSON wrote (a gateway reads the fields
// a worker listed).
func (f *Field) UnmarshalJSON(b []byte) error {
	type plain Field
	var v struct {
		plain
		MaxLen *int `json:"maxLen"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Field(v.plain)
	if v.MaxLen != nil {
		f.MaxLen = *v.MaxLen
	}
	return nil
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
	// damaged are the entries of the field tree qpdf left out.
	damaged []limits.Problem
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
	listed := map[string]bool{}
	for _, qf := range d.Acroform.Fields {
		listed[qf.Object] = true
		listed[qf.Annotation.Object] = true
		if err := f.addWidget(qf); err != nil {
			return nil, err
		}
	}
	f.damaged = damagedFields(d, listed)
	for _, fl := range f.fields {
		f.finish(fl)
	}
	return f, nil
}

func normRect(r []float64) [4]float64 {
	return [4]float64{min(r[0], r[2]), min(r[1], r[3]), max(r[0], r[2]), max(r[1], r[3])}
}

// addWidget adds the widget of one qpdf field entry to its field, making
// the field at its first widget; push buttons go to f.buttons instead.
func (f *form) addWidget(qf qfield) error {
	wd := f.doc.dict(qf.Annotation.Object)
	if wd == nil {
		return nil
	}
	w := f.newWidget(qf, wd)
	f.widgets[w.ref] = w
	typ := fieldType(qf)
	switch typ {
	case "":
		return nil // a widget of no known field type: dropped when flattening
	case "push":
		w.push = true
		f.buttons = append(f.buttons, w)
		return nil
	case "checkbox", "radio":
		w.onState = onState(f.doc, w)
	}
	fl := f.byName[qf.Fullname]
	if fl == nil {
		fl = f.newField(qf, typ, w)
		f.byName[fl.Name] = fl
		f.fields = append(f.fields, fl)
	}
	fl.widgets = append(fl.widgets, w)
	return nil
}

// newWidget is the widget of the annotation dictionary wd: its rectangle,
// state, default appearance (the form's when it inherits none) and the
// dictionaries the overlay and flattening read.
func (f *form) newWidget(qf qfield, wd map[string]any) *widget {
	d := f.doc
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
	return w
}

// fieldType is a field's Type from its /FT and flags: "push" for a push
// button (no value, only kept for flattening), "" for no known type.
func fieldType(qf qfield) string {
	switch qf.Fieldtype {
	case "/Tx":
		return "text"
	case "/Ch":
		return "choice"
	case "/Sig":
		return "signature"
	case "/Btn":
		switch {
		case qf.Fieldflags&flagPushbutton != 0:
			return "push"
		case qf.Fieldflags&flagRadio != 0:
			return "radio"
		}
		return "checkbox"
	}
	return ""
}

// onState is the name of a button widget's on state: the first normal
// appearance other than /Off, "" if it has none.
func onState(d *qdoc, w *widget) string {
	for k := range d.dict(w.ap["/N"]) {
		if k != "/Off" && strings.HasPrefix(k, "/") {
			return k[1:]
		}
	}
	return ""
}

// newField is the field of type typ whose first widget is w: the flags
// that matter for its type, MaxLen and the current value.
func (f *form) newField(qf qfield, typ string, w *widget) *Field {
	flags := qf.Fieldflags
	fl := &Field{Name: qf.Fullname, Type: typ, Page: w.page, Rect: w.rect, flags: flags, quad: qf.Quadding}
	fl.Required = flags&flagRequired != 0
	fl.ReadOnly = flags&flagReadOnly != 0
	fl.Multiline = typ == "text" && flags&flagMultiline != 0
	fl.comb = typ == "text" && flags&(flagComb|flagMultiline|flagPassword) == flagComb
	fl.pass = typ == "text" && flags&flagPassword != 0
	fl.Editable = typ == "choice" && flags&flagCombo != 0 && flags&flagEdit != 0
	fl.MultiSelect = typ == "choice" && flags&flagMultiSelect != 0
	if n, ok := f.doc.number(f.doc.inherited(qf.Annotation.Object, "/MaxLen")); ok && n > 0 {
		fl.MaxLen = int(n)
	}
	// A comb field spreads its text over MaxLen cells: without MaxLen
	// there are no cells.
	if fl.MaxLen == 0 {
		fl.comb = false
	}
	fl.Value = f.currentValue(qf)
	return fl
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
	switch fl.Type {
	case "choice":
		f.finishChoice(fl)
	case "checkbox", "radio":
		f.finishButton(fl)
	case "signature":
		fl.Value = nil
	}
}

// finishChoice reads a choice field's /Opt: the export values, and the
// display texts where they differ. A multiple-choice list's value is
// always a list.
func (f *form) finishChoice(fl *Field) {
	d := f.doc
	for _, o := range d.array(d.inherited(fl.widgets[0].ref, "/Opt")) {
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
}

// finishButton collects a button field's on states and their export
// values, and turns its /V into users' terms: a check box with one on
// state is true or false, other buttons their export value (or false for
// a check box, null for a radio group, when off).
func (f *form) finishButton(fl *Field) {
	f.buttonStates(fl)
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
}

// buttonStates sets a button field's onStates (each widget's, once, in
// widget order), exports and Options.
func (f *form) buttonStates(fl *Field) {
	d := f.doc
	opt := d.array(d.inherited(fl.widgets[0].ref, "/Opt"))
	fl.exports = map[string]string{}
	for i, w := range fl.widgets {
		if w.onState == "" || slices.Contains(fl.onStates, w.onState) {
			continue
		}
		fl.onStates = append(fl.onStates, w.onState)
		export := w.onState
		if s, ok := optExport(d, opt, i, w.onState); ok {
			export = s
		}
		fl.exports[w.onState] = export
		fl.Options = append(fl.Options, export)
	}
}

// optExport is the export value /Opt gives the on state of the i-th
// widget. With /Opt the on-state names are indices (or the widget order
// is), and /Opt holds the export values.
func optExport(d *qdoc, opt []any, i int, onState string) (string, bool) {
	if len(opt) == 0 {
		return "", false
	}
	idx := i
	if n, err := strconv.Atoi(onState); err == nil {
		idx = n
	}
	if idx < 0 || idx >= len(opt) {
		return "", false
	}
	return d.text(opt[idx])
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

// CodeDamagedField is the warning code of a field the form lists but that
// cannot be read (not a dictionary, a missing object, widgets that cannot
// be found): it is left out of the fields and of the flattened form.
const CodeDamagedField = "damaged_field"

// damagedFields walks the form's field tree (/AcroForm /Fields and /Kids)
// and reports every entry qpdf could not make a field of: those it
// dropped with a warning ("encountered a non-dictionary … ignoring") and
// those it dropped without one (/Kids that is not a list). listed holds the
// field and widget objects qpdf did list. The walk visits each object once
// and keeps MaxProblems problems.
func damagedFields(d *qdoc, listed map[string]bool) []limits.Problem {
	af := d.dict(d.catalog()["/AcroForm"])
	if af == nil {
		return nil
	}
	fw := &fieldWalk{d: d, listed: listed, seen: map[string]bool{}}
	fw.push(d.array(af["/Fields"]), "", 0)
	for len(fw.todo) > 0 {
		n := fw.todo[len(fw.todo)-1]
		fw.todo = fw.todo[:len(fw.todo)-1]
		fw.visit(n)
	}
	if fw.more > 0 || len(fw.out) > limits.MaxProblems+1 {
		fw.out = limits.CapProblems(fw.out, fw.more)
	}
	return fw.out
}

// fieldWalk is damagedFields' walk: a stack of entries still to visit,
// the objects visited, and the problems found (out, then a count of more).
type fieldWalk struct {
	d      *qdoc
	listed map[string]bool
	seen   map[string]bool
	todo   []fieldNode
	out    []limits.Problem
	more   int
}

// fieldNode is an entry of the field tree still to visit.
type fieldNode struct {
	v      any
	parent string // the parent's qualified name
	depth  int
}

// push adds a list of entries to visit, last entry first: the walk
// reports in document order.
func (fw *fieldWalk) push(entries []any, parent string, depth int) {
	for i := len(entries) - 1; i >= 0; i-- {
		fw.todo = append(fw.todo, fieldNode{v: entries[i], parent: parent, depth: depth})
	}
}

// report records a damaged entry, or counts it past MaxProblems.
func (fw *fieldWalk) report(msg string) {
	if len(fw.out) > limits.MaxProblems {
		fw.more++
		return
	}
	fw.out = append(fw.out, limits.Problem{Field: "pdf", Source: limits.SourceDocument, Code: CodeDamagedField,
		Message: msg + "; it is left out of the form's fields and of the filled form"})
}

// visit checks one entry of the field tree and pushes its kids.
func (fw *fieldWalk) visit(n fieldNode) {
	d := fw.d
	ref, isIndirect := isRef(n.v)
	if isIndirect {
		if fw.seen[ref] {
			return
		}
		fw.seen[ref] = true
	}
	fd := d.dict(n.v)
	if fd == nil {
		fw.report(entryWhere(n, ref, isIndirect) + " is not a field (it is missing or not a dictionary)")
		return
	}
	name := n.parent
	if t, ok := d.text(fd["/T"]); ok {
		if name != "" {
			name += "."
		}
		name += t
	}
	kids, hasKids := fd["/Kids"]
	switch {
	case hasKids && d.array(kids) == nil:
		fw.report(fmt.Sprintf("field %q has /Kids that are not a list, so its widgets cannot be found", name))
	case hasKids && n.depth < 32:
		fw.push(d.array(kids), name, n.depth+1)
	case hasKids:
		fw.report(fmt.Sprintf("field %q is nested more than 32 levels deep", name))
	case isIndirect && !fw.listed[ref]:
		if name == "" {
			fw.report(entryWhere(n, ref, isIndirect) + " is a widget of no field")
		} else {
			fw.report(fmt.Sprintf("field %q (object %s) cannot be read", name, strings.TrimSuffix(ref, " R")))
		}
	}
}

// entryWhere names an entry of the field tree for a problem: where it is
// listed and, for an object of its own, its object number.
func entryWhere(n fieldNode, ref string, isIndirect bool) string {
	where := "an entry of the field list"
	if n.parent != "" {
		where = fmt.Sprintf("a part of field %q", n.parent)
	}
	if isIndirect {
		where += " (object " + strings.TrimSuffix(ref, " R") + ")"
	}
	return where
}

// b64 encodes stream data for qpdf's JSON.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
