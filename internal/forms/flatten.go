package forms

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
)

// This file decides how each widget is flattened and writes the changes for
// qpdf (--update-from-json): every widget annotation leaves its page's
// /Annots (other annotations, such as links, stay), /AcroForm leaves the
// catalog (and with it any XFA), and the appearances worth keeping are drawn
// into the page content as form XObjects, placed as a viewer places an
// annotation's appearance (PDF 32000-1 §12.5.5).
//
// Which appearances are kept: a button's (check box, radio button, push
// button) appearance for its state when it draws without fonts, such as a
// LibreOffice check mark drawn as paths or an InDesign image button. An
// appearance that sets text uses a font the form names and rarely embeds
// (Acrobat's check marks are ZapfDingbats characters, its captions
// Helvetica), so it is redrawn instead: the mark or caption in an embedded
// font, the background and border from /MK. Text and choice fields are
// always redrawn (overlay.go), so every value, given or kept, comes out in
// embedded fonts.

// plan is the flattening of a whole form.
type plan struct {
	overlay []overlayPage     // pages that get an overlay, in page order
	keep    map[int][]*widget // 0-based page → widgets whose appearance is drawn into the content
	texts   []string          // every text the overlay sets (for its scripts)
}

// makePlan decides what every widget shows.
func makePlan(f *form, vals map[*Field]fill) *plan {
	pl := &planner{f: f, p: &plan{keep: map[int][]*widget{}}, byPage: map[int][]overlayItem{}}
	for _, fl := range f.fields {
		v := vals[fl]
		for _, w := range fl.widgets {
			pl.widget(fl, v, w)
		}
	}
	for _, w := range f.buttons {
		if pl.keepAP(w) {
			continue
		}
		caption, _ := f.doc.text(w.mk["/CA"])
		pl.add(w, overlayItem{w: w, text: caption, decor: true})
	}
	for i := range f.pages {
		if items := pl.byPage[i]; len(items) > 0 {
			pl.p.overlay = append(pl.p.overlay, overlayPage{index: i, items: items})
		}
	}
	return pl.p
}

// planner is makePlan's state: the plan so far and the overlay items of
// each 0-based page, collected before the pages are put in order.
type planner struct {
	f      *form
	p      *plan
	byPage map[int][]overlayItem
}

// shown reports whether a widget is drawn at all: on a page of the form
// and neither hidden nor marked not to be viewed.
func (pl *planner) shown(w *widget) bool {
	return w.page >= 1 && w.page <= len(pl.f.pages) && w.flags&(annotHidden|annotNoView) == 0
}

// add puts an item on its widget's overlay page, if the widget is shown.
func (pl *planner) add(w *widget, it overlayItem) {
	if !pl.shown(w) {
		return
	}
	pl.byPage[w.page-1] = append(pl.byPage[w.page-1], it)
	if it.text != "" {
		pl.p.texts = append(pl.p.texts, it.text)
	}
}

// keepAP keeps a shown widget's own appearance, drawn into the page's
// content, when it has one that uses no fonts (one that sets text uses a
// font the form rarely embeds, so it is redrawn: see the top of this
// file); it reports whether it did.
func (pl *planner) keepAP(w *widget) bool {
	if !pl.shown(w) {
		return false
	}
	if ap := pl.f.appearance(w); ap != "" && !pl.f.usesFonts(ap) {
		pl.p.keep[w.page-1] = append(pl.p.keep[w.page-1], w)
		return true
	}
	return false
}

// widget plans one widget of a field given the value v.
func (pl *planner) widget(fl *Field, v fill, w *widget) {
	switch fl.Type {
	case "text":
		text := v.text
		if fl.pass {
			text = strings.Repeat("•", len([]rune(text)))
		}
		pl.add(w, overlayItem{w: w, fl: fl, text: text, lines: fl.Multiline, decor: true})
	case "choice":
		pl.add(w, overlayItem{w: w, fl: fl, text: choiceText(fl, v), lines: fl.flags&flagCombo == 0, decor: true})
	case "checkbox", "radio":
		pl.button(fl, v, w)
	case "signature":
		if !pl.keepAP(w) {
			pl.add(w, overlayItem{w: w, fl: fl, decor: true})
		}
	}
}

// choiceText is what a choice field shows: a combo box its first choice
// on one line, a list box every choice, one a line.
func choiceText(fl *Field, v fill) string {
	if fl.flags&flagCombo != 0 && len(v.chose) > 0 {
		return v.chose[0]
	}
	return strings.Join(v.chose, "\n")
}

// button sets a check box's or radio button's state from the value and
// keeps its appearance for that state where it can, or draws a mark.
func (pl *planner) button(fl *Field, v fill, w *widget) {
	w.state = "Off"
	if v.state != "Off" && v.state == w.onState {
		w.state = v.state
	}
	if pl.keepAP(w) {
		return
	}
	it := overlayItem{w: w, fl: fl, decor: true}
	if w.state != "Off" {
		it.mark = true
		it.text = markFor(pl.f, w, fl.Type)
	}
	pl.add(w, it)
}

// markFor is the check mark or bullet a button shows when it is on.
func markFor(f *form, w *widget, typ string) string {
	if ca, ok := f.doc.text(w.mk["/CA"]); ok {
		if m, ok := zapfMarks[ca]; ok {
			return m
		}
	}
	if typ == "radio" {
		return "●"
	}
	return "✔"
}

// appearance is the reference of the stream a widget shows in its current
// state, "" if it has none.
func (f *form) appearance(w *widget) string {
	n := w.ap["/N"]
	if ref, ok := isRef(n); ok {
		if o, ok := f.doc.object("obj:" + ref); ok && o.Stream != nil {
			return ref
		}
	}
	states := f.doc.dict(n)
	if states == nil || w.state == "" {
		return ""
	}
	ref, _ := isRef(states["/"+w.state])
	if o, ok := f.doc.object("obj:" + ref); !ok || o.Stream == nil {
		return ""
	}
	return ref
}

// usesFonts reports whether an appearance stream (or a form XObject it
// draws, one level down) has fonts in its resources.
func (f *form) usesFonts(ref string) bool {
	d := f.doc
	res := d.dict(d.dict(ref)["/Resources"])
	if len(d.dict(res["/Font"])) > 0 {
		return true
	}
	for _, x := range d.dict(res["/XObject"]) {
		xd := d.dict(x)
		if len(d.dict(d.dict(xd["/Resources"])["/Font"])) > 0 {
			return true
		}
	}
	return false
}

// apMatrix is the placement of an appearance stream in its widget's
// rectangle: the matrix that maps the stream's bounding box, transformed by
// its own /Matrix, onto the rectangle (the stream's /Matrix itself is
// applied by the Do operator).
func (f *form) apMatrix(ref string, rect [4]float64) ([6]float64, bool) {
	d := f.doc
	sd := d.dict(ref)
	bb := d.numbers(sd["/BBox"])
	if len(bb) != 4 {
		return [6]float64{}, false
	}
	m := d.numbers(sd["/Matrix"])
	if len(m) != 6 {
		m = []float64{1, 0, 0, 1, 0, 0}
	}
	xs := []float64{}
	ys := []float64{}
	for _, c := range [][2]float64{{bb[0], bb[1]}, {bb[2], bb[1]}, {bb[0], bb[3]}, {bb[2], bb[3]}} {
		xs = append(xs, m[0]*c[0]+m[2]*c[1]+m[4])
		ys = append(ys, m[1]*c[0]+m[3]*c[1]+m[5])
	}
	sort.Float64s(xs)
	sort.Float64s(ys)
	bw, bh := xs[3]-xs[0], ys[3]-ys[0]
	if bw <= 0 || bh <= 0 {
		return [6]float64{}, false
	}
	sx, sy := (rect[2]-rect[0])/bw, (rect[3]-rect[1])/bh
	return [6]float64{sx, 0, 0, sy, rect[0] - xs[0]*sx, rect[1] - ys[0]*sy}, true
}

// updateJSON is qpdf's update document: the catalog without /AcroForm, each
// page without widget annotations and, where appearances are kept, with
// content that draws them.
func updateJSON(f *form, p *plan) ([]byte, error) {
	d := f.doc
	u := &update{d: d, objs: map[string]any{}, next: d.header.MaxObjectID}
	if ref := d.catalogRef(); ref != "" {
		u.set(ref, u.flatCatalog())
	}
	for i, pg := range f.pages {
		o, ok := d.object("obj:" + pg.ref)
		pd, _ := o.Value.(map[string]any)
		if !ok || pd == nil {
			continue
		}
		if np, changed := u.flatPage(f, pg, pd, p.keep[i]); changed {
			u.set(pg.ref, np)
		}
	}
	header := map[string]any{"jsonversion": 2, "pdfversion": d.header.PDFVersion, "maxobjectid": u.next,
		"pushedinheritedpageresources": false, "calledgetallpages": false}
	return json.Marshal(map[string]any{"qpdf": []any{header, u.objs}})
}

// update collects the objects of qpdf's update document: changed objects
// by reference, and new streams numbered after the document's last object.
type update struct {
	d    *qdoc
	objs map[string]any
	next int
}

// set replaces the value of the object ref.
func (u *update) set(ref string, v any) {
	u.objs["obj:"+ref] = map[string]any{"value": v}
}

// newStream adds a stream object holding data and returns its reference.
func (u *update) newStream(data string) string {
	u.next++
	ref := strconv.Itoa(u.next) + " 0 R"
	u.objs["obj:"+ref] = map[string]any{"stream": map[string]any{"dict": map[string]any{}, "data": b64([]byte(data))}}
	return ref
}

// flatCatalog is the catalog without the form and without scripts.
func (u *update) flatCatalog() map[string]any {
	d := u.d
	cat := maps.Clone(d.catalog())
	delete(cat, "/AcroForm")
	delete(cat, "/NeedsRendering")
	// A flattened form has nothing left for scripts to work on, and a
	// document that runs code when it opens is not what was asked
	// for: the document's actions go (an /OpenAction that is only a
	// destination, the page to open at, stays).
	delete(cat, "/AA")
	if oa, ok := cat["/OpenAction"]; ok && d.array(oa) == nil {
		delete(cat, "/OpenAction")
	}
	if names := d.dict(cat["/Names"]); names != nil {
		if _, ok := names["/JavaScript"]; ok {
			nn := maps.Clone(names)
			delete(nn, "/JavaScript")
			if nref, ok := isRef(cat["/Names"]); ok {
				u.set(nref, nn)
			} else {
				cat["/Names"] = nn
			}
		}
	}
	return cat
}

// flatPage is the page dictionary pd without widgets, page actions and
// scripted links, drawing the kept appearances; changed says whether it
// differs from pd.
func (u *update) flatPage(f *form, pg page, pd map[string]any, keep []*widget) (np map[string]any, changed bool) {
	annots, changed := u.pageAnnots(pg)
	np = maps.Clone(pd)
	if _, ok := np["/AA"]; ok {
		// The page's open and close actions.
		delete(np, "/AA")
		changed = true
	}
	if changed {
		if len(annots) == 0 {
			delete(np, "/Annots")
		} else {
			np["/Annots"] = annots
		}
	}
	if len(keep) > 0 {
		u.drawKept(f, pd, np, keep)
		changed = true
	}
	return np, changed
}

// pageAnnots are the page's annotations that stay: every one but the
// widgets, without scripts. changed says whether the page's /Annots must
// be written again (a widget went, or a direct annotation lost a script);
// an annotation that is an object of its own is cleaned in place.
func (u *update) pageAnnots(pg page) (annots []any, changed bool) {
	d := u.d
	for _, a := range pg.annots {
		ad := d.dict(a)
		if st, _ := d.name(ad["/Subtype"]); st == "Widget" {
			changed = true
			continue
		}
		// Other annotations (links) stay, without scripts: a link
		// keeps a URI or a destination, not a JavaScript action.
		if clean, stripped := d.withoutScripts(ad); stripped {
			if aref, ok := isRef(a); ok {
				u.set(aref, clean)
			} else {
				a = clean
				changed = true
			}
		}
		annots = append(annots, a)
	}
	return annots, changed
}

// drawKept adds to np (a copy of the page pd) content that draws the kept
// appearances as form XObjects, after the page's own content.
func (u *update) drawKept(f *form, pd, np map[string]any, keep []*widget) {
	d := u.d
	res := maps.Clone(d.dict(d.pageInherited(pd, "/Resources")))
	if res == nil {
		res = map[string]any{}
	}
	xo := maps.Clone(d.dict(res["/XObject"]))
	if xo == nil {
		xo = map[string]any{}
	}
	var content strings.Builder
	content.WriteString("Q\n")
	for k, w := range keep {
		ref := f.appearance(w)
		m, ok := f.apMatrix(ref, w.rect)
		if !ok {
			continue
		}
		name := fmt.Sprintf("/OPfx%d", k)
		for xo[name] != nil {
			name += "x"
		}
		xo[name] = ref
		fmt.Fprintf(&content, "q %s %s %s %s %s %s cm %s Do Q\n", pdfNum(m[0]), pdfNum(m[1]), pdfNum(m[2]), pdfNum(m[3]), pdfNum(m[4]), pdfNum(m[5]), name)
	}
	res["/XObject"] = xo
	np["/Resources"] = res
	// The page's own content is wrapped in q … Q so that a graphics
	// state it leaves behind cannot move the appearances.
	np["/Contents"] = append(append([]any{u.newStream("q\n")}, d.contents(pd)...), u.newStream(content.String()))
}

// contents are the page's content streams: /Contents is one stream or an
// array of them, either given directly or by reference.
func (d *qdoc) contents(pd map[string]any) []any {
	if ref, ok := isRef(pd["/Contents"]); ok {
		if a := d.array(ref); a != nil {
			return a
		}
		return []any{ref}
	}
	return d.array(pd["/Contents"])
}

// withoutScripts returns an annotation dictionary without additional
// actions (/AA) and without an /A that runs JavaScript (or starts a
// program, or chains to one); stripped says whether anything went.
func (d *qdoc) withoutScripts(ad map[string]any) (clean map[string]any, stripped bool) {
	if ad == nil {
		return nil, false
	}
	_, aa := ad["/AA"]
	bad := d.scripted(ad["/A"])
	if !aa && !bad {
		return ad, false
	}
	clean = maps.Clone(ad)
	delete(clean, "/AA")
	if bad {
		delete(clean, "/A")
	}
	return clean, true
}

// scripted reports whether an action, or one it chains to by /Next, runs
// JavaScript or launches something. It looks at 64 actions at most (a
// chain longer than that counts as scripted) and at each object once.
func (d *qdoc) scripted(action any) bool {
	seen := map[string]bool{}
	todo := []any{action}
	for n := 0; len(todo) > 0; n++ {
		if n == 64 {
			return true
		}
		v := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if ref, ok := isRef(v); ok {
			if seen[ref] {
				continue
			}
			seen[ref] = true
		}
		a := d.dict(v)
		if a == nil {
			continue
		}
		if s, _ := d.name(a["/S"]); s == "JavaScript" || s == "Launch" || s == "Rendition" {
			return true
		}
		switch next := a["/Next"]; d.resolve(next).(type) {
		case []any:
			todo = append(todo, d.array(next)...)
		case map[string]any:
			todo = append(todo, next)
		}
	}
	return false
}

func pdfNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
