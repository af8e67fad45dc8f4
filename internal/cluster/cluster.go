// Package cluster is the protocol between a gateway and its workers, both
// ends of it (as wtf's http package holds the server and the client of one
// API): the bundle a gateway sends, the route, the headers, the worker's
// listener (Worker), and the gateway's Render stage (Remote) with its probe
// of the workers' readiness and its reading of their answers.
//
// A gateway checks a document and fetches its images as `serve` does
// (worker.Ticket), then Remote posts the prepared document as a Bundle to
// a worker. The worker re-checks every limit it enforces (Check and Fetch
// again on the bundle, its own render limits) and renders under a slot of
// its one capacity, shared with its River job workers. A worker with no
// free slot answers busy at once — 429 with Retry-After and the body
// {"message","phase"} of SPEC §4 — so the gateway moves on to another; a
// draining worker answers 503 in the same shape. A document's problem is
// the error list of package httperr, read back into the same
// *limits.Error, so the gateway answers its client exactly as the worker
// did.
package cluster

import (
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
)

// RenderPath is the route gateways post bundles to.
const RenderPath = "/v1/worker/render"

// SecretHeader carries the cluster secret from gateway to worker.
const SecretHeader = "Outprint-Cluster-Secret"

// Headers of a worker's PDF answer, read back by Remote.
const (
	headerPages    = "X-Outprint-Pages"
	headerTitle    = "X-Outprint-Title"
	headerWarnings = "X-Outprint-Warnings"
	headerCPU      = "X-Outprint-Cpu-Ms"
	headerMaxRSS   = "X-Outprint-Max-Rss"
)

// Worker phases in busy answers: where the request was refused.
const (
	phaseAdmission = "admission"
	phaseDraining  = "draining"
)

// Bundle is a prepared document as a gateway hands it to a worker: the
// request's text and metadata with the images the gateway fetched and
// validated, keyed by the URL the Markdown uses. The worker makes a
// render.Request of it and runs Check and Fetch again (defence in depth:
// it re-checks every limit and never fetches anything itself, the images
// being in the bundle).
type Bundle struct {
	Name     string             `json:"name,omitempty"`
	Parts    int                `json:"parts,omitempty"`
	Markdown []byte             `json:"markdown"`
	Metadata []byte             `json:"metadata,omitempty"`
	Outline  *render.OutlineDoc `json:"outline,omitempty"`
	Assets   map[string][]byte  `json:"assets,omitempty"`
}

// NewBundle returns what a worker needs to render pr.
func NewBundle(pr *render.Prepared) Bundle {
	req := pr.Request()
	assets, _ := req.Images.(images.Assets)
	return Bundle{
		Name: req.Name, Parts: req.Parts, Markdown: req.Markdown, Metadata: req.Metadata,
		Outline: req.Outline, Assets: assets,
	}
}

// Request makes the request a worker checks and renders: its images come
// only from the bundle. Parts, which multiplies the Markdown and image
// bounds, is taken only for what can have parts — a collection, which is
// always an Outline document; any other bundle is one document (issue 24:
// "parts": 10 let a 9 MiB Markdown document through a worker).
func (b Bundle) Request() render.Request {
	parts := 1
	if b.Outline != nil && b.Parts > 1 {
		parts = b.Parts
	}
	return render.Request{
		Name: b.Name, Parts: parts, Markdown: b.Markdown, Metadata: b.Metadata, Outline: b.Outline,
		Images: images.Assets(b.Assets),
	}
}

// maxBundleBytes bounds a bundle before it is decoded: the largest
// Markdown a request may carry — a collection printed whole, up to
// limits.MaxCollectionBytes, not one document's limits.MaxMarkdownBytes —
// and the images of SPEC §3, both base64 in the JSON (a third more), with
// a margin for the JSON, the metadata and the images' names. The
// pipeline's own checks, by the request's Parts, run on what arrives.
const maxBundleBytes = (limits.MaxCollectionBytes+limits.MaxTotalImageBytes)*4/3 + 4<<20
