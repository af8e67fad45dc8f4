package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/worker"
)

// Forms on a gateway: the gateway runs no TeX and no qpdf of its own, so
// reading a form, checking a form job's values and filling a form are
// sent to a worker as renders are (Remote's order, busy and draining
// workers passed over, the document's errors read back), and the worker
// does them under its one capacity: the user counted, then a slot for
// reading and filling (worker.Ticket.Do), as `serve` does. A form job is
// inserted by the gateway after the worker checked it and filled by a
// worker's job runtime like any job.

// Routes gateways post forms to.
const (
	FormFieldsPath = "/v1/worker/forms/fields"
	FormCheckPath  = "/v1/worker/forms/check"
	FormFillPath   = "/v1/worker/forms/fill"
)

// Headers of a worker's filled form, read back by Remote.
const (
	headerFormFields = "X-Outprint-Form-Fields"
	headerFormFilled = "X-Outprint-Form-Filled"
)

// FormBundle is a form request as a gateway hands it to a worker: the
// PDF and the values JSON, both as the client sent them (the worker
// checks them as `serve` would).
type FormBundle struct {
	PDF    []byte `json:"pdf"`
	Values []byte `json:"values,omitempty"`
}

// maxFormBundleBytes bounds a form bundle before it is decoded: the PDF
// and the values, base64 in the JSON, with a margin.
const maxFormBundleBytes = (limits.MaxPDFBytes+forms.MaxValuesBytes)*4/3 + 1<<20

// Fields lists a form's fields on a worker (forms.Filler.Fields there).
func (rr *Remote) Fields(ctx context.Context, pdf []byte) ([]forms.Field, error) {
	a, err := rr.postForm(ctx, FormFieldsPath, FormBundle{PDF: pdf})
	if err != nil {
		return nil, err
	}
	var v struct {
		Fields []forms.Field `json:"fields"`
	}
	if err := json.Unmarshal(a.data, &v); err != nil {
		return nil, fmt.Errorf("gateway: read a worker's fields: %w", err)
	}
	return v.Fields, nil
}

// Check checks a form job's form and values on a worker, as acceptance
// does in `serve` (forms.Filler.Check).
func (rr *Remote) Check(ctx context.Context, pdf, values []byte) error {
	_, err := rr.postForm(ctx, FormCheckPath, FormBundle{PDF: pdf, Values: values})
	return err
}

// Fill fills and flattens a form on a worker (forms.Filler.Fill there).
// The result carries no TeX figures: the worker recorded its own.
func (rr *Remote) Fill(ctx context.Context, pdf, values []byte, _ func(phase string)) (*forms.Result, error) {
	a, err := rr.postForm(ctx, FormFillPath, FormBundle{PDF: pdf, Values: values})
	if err != nil {
		return nil, err
	}
	res := &forms.Result{PDF: a.data, Warnings: readWarnings(a.header)}
	res.Pages, _ = strconv.Atoi(a.header.Get(headerPages))
	res.Fields, _ = strconv.Atoi(a.header.Get(headerFormFields))
	res.Filled, _ = strconv.Atoi(a.header.Get(headerFormFilled))
	return res, nil
}

func (rr *Remote) postForm(ctx context.Context, path string, b FormBundle) (*workerAnswer, error) {
	body, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("gateway: encode form bundle: %w", err)
	}
	return rr.dispatch(ctx, path, body)
}

// errFormBundle answers a body that is not a form bundle.
var errFormBundle = httperr.BadRequest("", "the body must be a form bundle (JSON)")

// errFormBundleTooBig answers a form bundle over maxFormBundleBytes.
var errFormBundleTooBig = httperr.New(http.StatusRequestEntityTooLarge, limits.Problem{Source: limits.SourceRequest, Code: limits.CodeTooLarge,
	Message: fmt.Sprintf("the form bundle is larger than %d bytes", maxFormBundleBytes)})

// readForm authorizes and decodes a form bundle; false means it answered.
func (wk *Worker) readForm(w http.ResponseWriter, r *http.Request) (FormBundle, bool) {
	var b FormBundle
	if !wk.authorized(r) {
		wk.ans.Error(w, r, errSecret)
		return b, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBundleBytes)
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			wk.ans.Error(w, r, errFormBundleTooBig)
			return b, false
		}
		wk.ans.Error(w, r, errFormBundle)
		return b, false
	}
	return b, true
}

// admitForm reads a form bundle (readForm) and counts the request as a
// user of the capacity; false means it answered. The caller must call
// the ticket's Done.
func (wk *Worker) admitForm(w http.ResponseWriter, r *http.Request) (FormBundle, *worker.Ticket, bool) {
	b, ok := wk.readForm(w, r)
	if !ok {
		return b, nil, false
	}
	t, err := wk.cfg.Capacity.Enter(gatewayUser(r.Context()))
	if err != nil {
		wk.refuse(w, r, err)
		return b, nil, false
	}
	return b, t, true
}

// gatewayUser is the admission key of one gateway request: every request
// is a user of its own (gateways count their users).
func gatewayUser(ctx context.Context) string { return "\x00gateway-" + httperr.RequestID(ctx) }

// formFields is FormFieldsPath: the fields read under a slot.
func (wk *Worker) formFields(w http.ResponseWriter, r *http.Request) {
	b, t, ok := wk.admitForm(w, r)
	if !ok {
		return
	}
	defer t.Done()
	var fields []forms.Field
	err := t.Do(r.Context(), func(ctx context.Context) (int64, error) {
		var err error
		fields, err = wk.cfg.Forms.Fields(ctx, b.PDF)
		return 0, err
	})
	if err != nil {
		wk.refuse(w, r, err)
		return
	}
	if fields == nil {
		fields = []forms.Field{}
	}
	w.Header().Set("Cache-Control", "no-store")
	httperr.WriteJSON(w, http.StatusOK, map[string]any{"fields": fields})
}

// formCheck is FormCheckPath: a form job's acceptance, which in `serve`
// runs with the user counted, in a check place and within the check
// budget (worker.Ticket.CheckWith: qpdf killed when it runs out).
func (wk *Worker) formCheck(w http.ResponseWriter, r *http.Request) {
	b, t, ok := wk.admitForm(w, r)
	if !ok {
		return
	}
	defer t.Done()
	err := t.CheckWith(r.Context(), "its form", func(ctx context.Context) error {
		return wk.cfg.Forms.Check(ctx, b.PDF, b.Values)
	})
	if err != nil {
		wk.refuse(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	httperr.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// formFill is FormFillPath: the form filled and flattened under a slot.
func (wk *Worker) formFill(w http.ResponseWriter, r *http.Request) {
	b, t, ok := wk.admitForm(w, r)
	if !ok {
		return
	}
	defer t.Done()
	var res *forms.Result
	err := t.Do(r.Context(), func(ctx context.Context) (int64, error) {
		var err error
		res, err = wk.cfg.Forms.Fill(ctx, b.PDF, b.Values, nil)
		if err == nil && res.TeX != nil {
			return res.TeX.MaxRSS, nil
		}
		return 0, err
	})
	if err != nil {
		wk.refuse(w, r, err)
		return
	}
	t.Done()
	h := w.Header()
	h.Set(headerPages, strconv.Itoa(res.Pages))
	h.Set(headerFormFields, strconv.Itoa(res.Fields))
	h.Set(headerFormFilled, strconv.Itoa(res.Filled))
	if len(res.Warnings) > 0 {
		if j, err := json.Marshal(res.Warnings); err == nil {
			h.Set(headerWarnings, base64.RawURLEncoding.EncodeToString(j))
		}
	}
	h.Set("Content-Type", "application/pdf")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(res.PDF)))
	w.WriteHeader(http.StatusOK)
	// The status is sent: a failed write means the gateway went away, and
	// it sees a short body against Content-Length.
	_, _ = w.Write(res.PDF)
}
