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
	p := &plan{keep: map[int][]*widget{}}
	byPage := map[int][]overlayItem{}
	add := func(w *widget, it overlayItem) {
		if w.page < 1 || w.page > len(f.pages) || w.flags&(annotHidden|annotNoView) != 0 {
			return
		}
		byPage[w.page-1] = append(byPage[w.page-1], it)
		if it.text != "" {
			p.texts = append(p.texts, it.text)
		}
	}
	keepAP := func(w *widget) bool {
		if w.page < 1 || w.page > len(f.pages) || w.flags&(annotHidden|annotNoView) != 0 {
			return false
		}
		if ap := f.appearance(w); ap != "" && !f.usesFonts(ap) {
			p.keep[w.page-1] = append(p.keep[w.page-1], w)
			return true
		}
		return false
	}
	for _, fl := range f.fields {
		v := vals[fl]
		for _, w := range fl.widgets {
			switch fl.Type {
			case "text":
				text := v.text
				if fl.pass {
					text = strings.Repeat("•", len([]rune(text)))
				}
				add(w, overlayItem{w: w, fl: fl, text: text, lines: fl.Multiline, decor: true})
			case "choice":
				combo := fl.flags&flagCombo != 0
				text := strings.Join(v.chose, "\n")
				if combo && len(v.chose) > 0 {
					text = v.chose[0]
				}
				add(w, overlayItem{w: w, fl: fl, text: text, lines: !combo, decor: true})
			case "checkbox", "radio":
				w.state = "Off"
				if v.state != "Off" && v.state == w.onState {
					w.state = v.state
				}
				if keepAP(w) {
					continue
				}
				it := overlayItem{w: w, fl: fl, decor: true}
				if w.state != "Off" {
					it.mark = true
					it.text = markFor(f, w, fl.Type)
				}
				add(w, it)
			case "signature":
				if !keepAP(w) {
					add(w, overlayItem{w: w, fl: fl, decor: true})
				}
			}
		}
	}
	for _, w := range f.buttons {
		if keepAP(w) {
			continue
		}
		caption, _ := f.doc.text(w.mk["/CA"])
		add(w, overlayItem{w: w, text: caption, decor: true})
	}
	for i := range f.pages {
		if items := byPage[i]; len(items) > 0 {
			p.overlay = append(p.overlay, overlayPage{index: i, items: items})
		}
	}
	return p
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
		if o, ok := f.doc.objects["obj:"+ref]; ok && o.Stream != nil {
			return ref
		}
	}
	states := f.doc.dict(n)
	if states == nil || w.state == "" {
		return ""
	}
	ref, _ := isRef(states["/"+w.state])
	if o, ok := f.doc.objects["obj:"+ref]; !ok || o.Stream == nil {
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
	objs := map[string]any{}
	next := d.header.MaxObjectID
	newStream := func(data string) string {
		next++
		ref := strconv.Itoa(next) + " 0 R"
		objs["obj:"+ref] = map[string]any{"stream": map[string]any{"dict": map[string]any{}, "data": b64([]byte(data))}}
		return ref
	}
	if ref := d.catalogRef(); ref != "" {
		cat := maps.Clone(d.catalog())
		delete(cat, "/AcroForm")
		delete(cat, "/NeedsRendering")
		objs["obj:"+ref] = map[string]any{"value": cat}
	}
	for i, pg := range f.pages {
		o, ok := d.objects["obj:"+pg.ref]
		pd, _ := o.Value.(map[string]any)
		if !ok || pd == nil {
			continue
		}
		changed := false
		var annots []any
		for _, a := range pg.annots {
			if st, _ := d.name(d.dict(a)["/Subtype"]); st == "Widget" {
				changed = true
				continue
			}
			annots = append(annots, a)
		}
		np := maps.Clone(pd)
		if changed {
			if len(annots) == 0 {
				delete(np, "/Annots")
			} else {
				np["/Annots"] = annots
			}
		}
		if keep := p.keep[i]; len(keep) > 0 {
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
			var contents []any
			if ref, ok := isRef(pd["/Contents"]); ok {
				if a := d.array(ref); a != nil {
					contents = a
				} else {
					contents = []any{ref}
				}
			} else {
				contents = d.array(pd["/Contents"])
			}
			// The page's own content is wrapped in q … Q so that a graphics
			// state it leaves behind cannot move the appearances.
			np["/Contents"] = append(append([]any{newStream("q\n")}, contents...), newStream(content.String()))
			changed = true
		}
		if changed {
			objs["obj:"+pg.ref] = map[string]any{"value": np}
		}
	}
	header := map[string]any{"jsonversion": 2, "pdfversion": d.header.PDFVersion, "maxobjectid": next,
		"pushedinheritedpageresources": false, "calledgetallpages": false}
	return json.Marshal(map[string]any{"qpdf": []any{header, objs}})
}

func pdfNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
