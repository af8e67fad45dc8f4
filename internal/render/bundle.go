package render

import "github.com/outprint/outprint/internal/images"

// Bundle is a prepared document as a gateway hands it to a remote worker:
// the request's text and metadata with the images the gateway fetched and
// validated, keyed by the URL the Markdown uses. The worker makes a Request
// of it and runs Check and Fetch again (defence in depth: it re-checks every
// limit and never fetches anything itself, the images being in the bundle).
type Bundle struct {
	Name     string            `json:"name,omitempty"`
	Parts    int               `json:"parts,omitempty"`
	Markdown []byte            `json:"markdown"`
	Metadata []byte            `json:"metadata,omitempty"`
	Outline  *OutlineDoc       `json:"outline,omitempty"`
	Assets   map[string][]byte `json:"assets,omitempty"`
}

// Bundle returns what a remote worker needs to render p.
func (p *Prepared) Bundle() Bundle {
	return Bundle{
		Name: p.req.Name, Parts: p.req.Parts, Markdown: p.req.Markdown, Metadata: p.req.Metadata,
		Outline: p.req.Outline, Assets: p.images.Assets(),
	}
}

// Request makes the request a worker checks and renders: its images come
// only from the bundle.
func (b Bundle) Request() Request {
	return Request{
		Name: b.Name, Parts: b.Parts, Markdown: b.Markdown, Metadata: b.Metadata, Outline: b.Outline,
		Images: images.Assets(b.Assets),
	}
}
