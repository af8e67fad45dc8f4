package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/worker"
)

// Office documents on a gateway (issue 28): the gateway runs no
// LibreOffice, so a conversion is sent to a worker as a render is — the
// file is the bundle. The gateway counts the user, recognises the file
// (office.Detect needs no LibreOffice) and holds a slot of its capacity
// while Remote.Convert posts it (Remote's order, busy and draining
// workers passed over, the document's errors read back); the worker
// recognises the file again (it does not trust the gateway) and converts
// it under a slot of its one capacity (worker.Ticket.Convert), shared with
// its job workers, which convert office jobs themselves.

// ConvertPath is the route gateways post Office documents to.
const ConvertPath = "/v1/worker/convert"

// OfficeBundle is an Office document as a gateway hands it to a worker:
// the file's bytes, the format the gateway recognised (the worker
// recognises it again, with this format's extension as its name, which
// only a CSV needs) and the client's overrides.
type OfficeBundle struct {
	Doc    []byte `json:"doc"`
	Format string `json:"format"`
	// Options are the overrides as an office job stores them
	// (worker.OfficeOptionsJSON), read again by worker.OfficeOptions.
	Options json.RawMessage `json:"options,omitempty"`
}

// maxOfficeBundleBytes bounds an Office bundle before it is decoded: the
// file, base64 in the JSON, with a margin.
const maxOfficeBundleBytes = limits.MaxOfficeBytes*4/3 + 1<<20

// Convert converts doc on a worker. It implements worker.Converter (a
// gateway's httpapi.Config.Office).
func (rr *Remote) Convert(ctx context.Context, doc []byte, f office.Format, o office.Options) ([]byte, error) {
	body, err := json.Marshal(OfficeBundle{Doc: doc, Format: f.Name, Options: worker.OfficeOptionsJSON(o)})
	if err != nil {
		return nil, fmt.Errorf("gateway: encode office bundle: %w", err)
	}
	a, err := rr.dispatch(ctx, ConvertPath, body)
	if err != nil {
		return nil, err
	}
	return a.data, nil
}

// errOfficeBundle answers a body that is not an Office bundle.
var errOfficeBundle = httperr.BadRequest("", "the body must be an office bundle (JSON)")

// errOfficeBundleTooBig answers an Office bundle over maxOfficeBundleBytes.
var errOfficeBundleTooBig = httperr.New(http.StatusRequestEntityTooLarge, limits.Problem{Source: limits.SourceRequest, Code: limits.CodeTooLarge,
	Message: fmt.Sprintf("the office bundle is larger than %d bytes", maxOfficeBundleBytes)})

// convert is ConvertPath: the file recognised again, then SPEC §4's
// order on the worker's capacity — every request a user of its own, a
// slot, the conversion within the render limits.
func (wk *Worker) convert(w http.ResponseWriter, r *http.Request) {
	if !wk.authorized(r) {
		wk.ans.Error(w, r, errSecret)
		return
	}
	var b OfficeBundle
	r.Body = http.MaxBytesReader(w, r.Body, maxOfficeBundleBytes)
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			wk.ans.Error(w, r, errOfficeBundleTooBig)
			return
		}
		wk.ans.Error(w, r, errOfficeBundle)
		return
	}
	f, err := office.Detect(b.Doc, "document."+b.Format)
	if err != nil {
		wk.ans.Error(w, r, err)
		return
	}
	o, err := worker.OfficeOptions(b.Options)
	if err != nil {
		wk.ans.Error(w, r, err)
		return
	}
	t, err := wk.cfg.Capacity.Enter(gatewayUser(r.Context()))
	if err != nil {
		wk.refuse(w, r, err)
		return
	}
	defer t.Done()
	res, err := t.Convert(r.Context(), wk.cfg.Office, b.Doc, f, o)
	if err != nil {
		wk.refuse(w, r, err)
		return
	}
	t.Done()
	h := w.Header()
	h.Set(headerPages, strconv.Itoa(res.Pages))
	h.Set("Content-Type", "application/pdf")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(res.PDF)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(res.PDF) // a client that left needs no answer
}
