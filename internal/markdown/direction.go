package markdown

import (
	"strings"

	emojiast "github.com/yuin/goldmark-emoji/ast"
	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"

	"github.com/outprint/outprint/internal/script"
)

// Paragraph direction. A block runs right to left when its first strong
// letter does (rules P2 and P3 of the Unicode bidi algorithm, as a
// browser's dir=auto decides): paragraphs, headings, list items, table
// cells, quotes, notices, toggles and captions each decide for themselves,
// a block without letters takes the direction around it. The bidi package
// sets the paragraphs (\opsetrtl, \opsetltr: its \setRTL and \setLTR; the
// preamble loads it for documents with right-to-left scripts, see
// Profile.RTL): each line starts at the right margin, lists, quotes and
// notice frames are mirrored. A document whose language is right to left
// (\opdocrtl) also sets its title block, table of contents, footer and the
// column order of its tables right to left. Inside a paragraph, the
// stretches that run the other way are \beginR … \endR or \beginL … \endL
// (texWriter.runs): TeX--XeT orders the text, the writer never reorders
// letters itself.

// rtlLanguages are the primary language subtags of right-to-left
// languages in use (CLDR's list of right-to-left scripts' languages).
var rtlLanguages = map[string]bool{
	"ar": true, "arc": true, "ckb": true, "dv": true, "fa": true, "he": true, "iw": true, "ji": true,
	"ks": true, "ku-arab": true, "lrc": true, "mzn": true, "nqo": true, "ps": true, "sd": true, "syr": true,
	"ug": true, "ur": true, "yi": true,
}

// RTLLanguage reports whether a BCP 47 language tag names a language
// written right to left (ar, he, fa, ur, ps, yi, dv, …); a script subtag
// decides where there is one (az-Arab is, ku-Latn is not).
func RTLLanguage(tag string) bool {
	tag = strings.ToLower(tag)
	parts := strings.Split(tag, "-")
	for _, p := range parts[1:] {
		switch p {
		case "arab", "hebr", "thaa", "syrc", "nkoo", "adlm", "rohg":
			return true
		case "latn", "cyrl":
			return false
		}
	}
	return rtlLanguages[parts[0]]
}

// NeedsBidi reports whether a document's body uses the bidi package
// (Profile.RTL): it has right-to-left text or its language is right to
// left.
func (d *Document) NeedsBidi(meta Meta) bool {
	return d.scripts&(script.Arabic|script.Hebrew) != 0 || RTLLanguage(meta.Language)
}

// setDir sets the direction of the paragraphs that follow (TeX's, and
// the writer's idea of it, writer.dir). Inside a footnote the direction
// stays that of the paragraph holding the mark: the note's first
// paragraph has begun before its text.
func (r *writer) setDir(rtl bool) {
	if !r.dirs || r.footnote {
		return
	}
	r.nl()
	if rtl {
		r.raw("\\opsetrtl\n")
	} else {
		r.raw("\\opsetltr\n")
	}
	r.dir = rtl
}

// keepDir runs f and then takes the writer's direction back to what it
// was: f's switches end with the TeX group f closes.
func (r *writer) keepDir(f func()) {
	saved := r.dir
	f()
	r.dir = saved
}

// dirOf returns the direction of block n: its first strong letter's, or
// the direction around it when it has none.
func (r *writer) dirOf(n ast.Node) bool {
	if !r.dirs {
		return false
	}
	if rtl, ok := r.firstStrong(n); ok {
		return rtl
	}
	return r.dir
}

// firstStrong finds the first strong letter of n's text in reading
// order. Formulas, raw HTML tags, emoji, images and code blocks are not
// text (a browser's dir=auto skips them too).
func (r *writer) firstStrong(n ast.Node) (rtl, found bool) {
	switch n := n.(type) {
	case *ast.Text:
		return script.FirstStrong(r.d.textValue(n))
	case *ast.String:
		return script.FirstStrong(string(n.Value))
	case *ast.AutoLink:
		return script.FirstStrong(string(n.Label(r.d.src)))
	case *ast.RawHTML, *MathInline, *MathBlock, *emojiast.Emoji, *extast.FootnoteLink,
		*extast.TaskCheckBox, *ast.FencedCodeBlock, *ast.CodeBlock, *ast.HTMLBlock, *ast.ThematicBreak:
		return false, false
	case *ast.Image:
		if r.imageShown(n) {
			return false, false
		}
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if rtl, found := r.firstStrong(c); found {
			return rtl, true
		}
	}
	return false, false
}
