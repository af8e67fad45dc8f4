package markdown

import (
	"context"
	"errors"
)

// errStopped is the panic value of a writer whose stop channel closed; it
// never leaves LaTeXContext.
var errStopped = errors.New("markdown: LaTeX conversion stopped")

// LaTeXContext is LaTeX that stops within one block once ctx ends and
// returns ctx's error. The conversion is pure CPU: a document built to be
// slow (thousands of distinct code languages, of headings) must not keep a
// render slot or the server's CPU busy after its deadline or after its
// client left, so the writer looks at ctx before every block.
func (d *Document) LaTeXContext(ctx context.Context, meta Meta, images map[string]Image) (out *Output, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	defer func() {
		if v := recover(); v != nil {
			if v != errStopped { //nolint:errorlint // the sentinel itself is the panic value
				panic(v)
			}
			out, err = nil, context.Cause(ctx)
		}
	}()
	return d.latex(func() bool { return ctx.Err() != nil }, meta, images)
}

// checkStop gives up the conversion once stop says so. A panic unwinds the
// writer's recursion at once; LaTeXContext recovers it.
func (r *writer) checkStop() {
	if r.stop != nil && r.stop() {
		panic(errStopped)
	}
}
