package markdown

// Lists: bullets, numbers, Outline's letter lists and task lists.

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/yuin/goldmark/ast"
	extast "github.com/yuin/goldmark/extension/ast"
)

func (r *writer) list(n *ast.List) {
	r.keepDir(func() {
		r.setDir(r.dirOf(n))
		r.listIn(n)
	})
}

// listIn is list in the list's direction.
func (r *writer) listIn(n *ast.List) {
	ordered := n.IsOrdered()
	letters, lettered := r.letterList(n)
	if r.listDepth >= maxListDepth {
		// Flattened: each item is a paragraph with its label.
		num := n.Start
		for it := n.FirstChild(); it != nil; it = it.NextSibling() {
			r.at(it)
			r.nl()
			r.raw(`\opflatitem{`)
			if lettered && taskBox(it) == nil {
				r.text(letterLabel(letters.value+num-n.Start, letters.upper)+".", modeText)
			} else {
				r.itemLabel(it, ordered, num, n.Marker)
			}
			r.raw("}\n")
			r.itemBody(it)
			num++
		}
		return
	}
	if lettered {
		r.letterItems(n, letters)
		return
	}
	r.listDepth++
	env := "itemize"
	var opts []string
	if ordered {
		env = "enumerate"
		if n.Start != 1 {
			opts = append(opts, "start="+strconv.Itoa(n.Start))
		}
		if n.Marker == ')' {
			opts = append(opts, `label=\arabic*)`)
		}
	}
	if n.IsTight {
		opts = append(opts, "nosep")
	}
	r.raw(`\begin{` + env + `}`)
	if len(opts) > 0 {
		r.raw(`[` + strings.Join(opts, ",") + `]`)
	}
	r.raw("\n")
	for it := n.FirstChild(); it != nil; it = it.NextSibling() {
		r.at(it)
		r.nl()
		if box := taskBox(it); box != nil {
			r.raw(`\item[{`)
			r.itemLabel(it, ordered, 0, 0)
			r.raw(`}]`)
		} else {
			r.raw(`\item`)
		}
		r.raw("\n")
		r.containerStart(it.FirstChild())
		r.itemBody(it)
	}
	r.nl()
	r.raw(`\end{` + env + "}\n")
	r.listDepth--
}

// letterList reports whether n is a letter list of Outline's dialect (its
// first item's marker was a letter, see letterLists) and its first value.
func (r *writer) letterList(n *ast.List) (letterItem, bool) {
	if len(r.d.letters) == 0 || !n.IsOrdered() || n.FirstChild() == nil {
		return letterItem{}, false
	}
	p := r.d.blockPos(n.FirstChild())
	if p < 0 || p > len(r.d.src) {
		return letterItem{}, false
	}
	start := bytes.LastIndexByte(r.d.src[:p], '\n') + 1
	it, ok := r.d.letters[start]
	return it, ok
}

// letterItems writes a letter list: an enumerate whose labels the writer
// sets itself (a., b., …, z., aa., as Outline numbers them; LaTeX's \alph
// stops at z).
func (r *writer) letterItems(n *ast.List, first letterItem) {
	r.listDepth++
	r.raw(`\begin{enumerate}`)
	if n.IsTight {
		r.raw(`[nosep]`)
	}
	r.raw("\n")
	i := 0
	for it := n.FirstChild(); it != nil; it = it.NextSibling() {
		r.at(it)
		r.nl()
		r.raw(`\item[{`)
		if taskBox(it) != nil {
			r.itemLabel(it, true, 0, 0)
		} else {
			r.text(letterLabel(first.value+i, first.upper)+".", modeText)
		}
		r.raw("}]\n")
		r.itemBody(it)
		i++
	}
	r.nl()
	r.raw("\\end{enumerate}\n")
	r.listDepth--
}

// taskBox returns the check box of a task list item.
func taskBox(it ast.Node) *extast.TaskCheckBox {
	if p := it.FirstChild(); p != nil {
		if b, ok := p.FirstChild().(*extast.TaskCheckBox); ok {
			return b
		}
	}
	return nil
}

func (r *writer) itemLabel(it ast.Node, ordered bool, num int, marker byte) {
	switch box := taskBox(it); {
	case box != nil && box.IsChecked:
		r.text(boxChecked, modeText)
	case box != nil:
		r.text(boxUnchecked, modeText)
	case ordered:
		r.raw(strconv.Itoa(num))
		if marker == ')' {
			r.raw(")")
		} else {
			r.raw(".")
		}
	default:
		r.raw(`\textbullet`)
	}
}

func (r *writer) itemBody(it ast.Node) {
	for c := it.FirstChild(); c != nil; c = c.NextSibling() {
		r.block(c)
	}
}
