package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/limits"
)

// The form routes: POST /v1/forms/fields (part pdf) lists a form's fields,
// POST /v1/forms/fill (parts pdf and values) answers the filled and
// flattened PDF. Both go through admission like a render: the user's count,
// then a slot, since reading a form runs qpdf and filling it runs TeX.

// maxFormBodyBytes bounds a form request: the PDF, the values and the
// multipart framing.
const maxFormBodyBytes = limits.MaxPDFBytes + forms.MaxValuesBytes + 1<<20

// formRoutes adds the form routes when a Filler is configured.
func (s *Server) formRoutes(mux *http.ServeMux) {
	if s.cfg.Forms == nil {
		return
	}
	mux.Handle("/v1/forms/fields", method(s, http.MethodPost, s.formFields))
	mux.Handle("/v1/forms/fill", method(s, http.MethodPost, s.formFill))
}

// formRequest is a read form request.
type formRequest struct {
	pdf, values []byte
}

// readFormRequest reads the multipart body: a pdf part and, when
// wantValues, a values part (JSON).
func (s *Server) readFormRequest(w http.ResponseWriter, r *http.Request, wantValues bool) (req formRequest, err error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return formRequest{}, errUnsupported
	}
	rc := http.NewResponseController(w)
	if derr := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)); derr == nil {
		defer func() {
			if !errors.Is(err, errBodyTimeout) {
				rc.SetReadDeadline(time.Time{})
			}
		}()
	}
	if r.ContentLength > maxFormBodyBytes {
		return formRequest{}, errRequestTooBig
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBodyBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		return formRequest{}, badRequest("", "the multipart body cannot be read: "+err.Error())
	}
	var havePDF, haveValues bool
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return formRequest{}, partError(r, err)
		}
		switch part.FormName() {
		case "pdf":
			if havePDF {
				return formRequest{}, badRequest("pdf", "send one pdf part")
			}
			havePDF = true
			b, err := io.ReadAll(io.LimitReader(part, limits.MaxPDFBytes+1))
			if err != nil {
				return formRequest{}, partError(r, err)
			}
			if len(b) > limits.MaxPDFBytes {
				return formRequest{}, &limits.Error{Kind: limits.KindTooLarge, Problems: []limits.Problem{{
					Field: "pdf", Source: limits.SourceDocument, Code: limits.CodeTooLarge,
					Message: fmt.Sprintf("the PDF is too large: more than %d bytes", limits.MaxPDFBytes),
				}}}
			}
			req.pdf = b
		case "values":
			if !wantValues {
				return formRequest{}, badRequest("values", "this route takes only the pdf part")
			}
			if haveValues {
				return formRequest{}, badRequest("values", "send one values part")
			}
			haveValues = true
			b, err := io.ReadAll(io.LimitReader(part, forms.MaxValuesBytes+1))
			if err != nil {
				return formRequest{}, partError(r, err)
			}
			req.values = b
		default:
			return formRequest{}, badRequest(part.FormName(), fmt.Sprintf("unknown part %q: use pdf and values", part.FormName()))
		}
	}
	if !havePDF {
		return formRequest{}, badRequest("pdf", "the pdf part is required")
	}
	if wantValues && !haveValues {
		return formRequest{}, badRequest("values", "the values part is required (a JSON object; {} keeps every value)")
	}
	return req, nil
}

// admitForm counts the user and takes a slot, runs work and records it
// like a render. The ticket is given back on every path.
func (s *Server) admitForm(ctx context.Context, id identity, work func(ctx context.Context) error) error {
	ticket, err := s.cfg.Admission.Enter(id.user)
	if err != nil {
		s.refused(err)
		return err
	}
	var took time.Duration
	defer func() { ticket.Done(took) }()
	err = ticket.Acquire(ctx)
	s.obs.ObserveQueueWait(ticket.Waited())
	if err != nil {
		s.refused(err)
		return err
	}
	start := time.Now()
	err = work(ctx)
	d := time.Since(start)
	result := renderResult(ctx, err)
	s.obs.ObserveRender(d, result)
	if result != resultCanceled && result != resultInternal {
		took = d
	}
	return err
}

// formFields is POST /v1/forms/fields.
func (s *Server) formFields(w http.ResponseWriter, r *http.Request) {
	id, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := s.readFormRequest(w, r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var fields []forms.Field
	err = s.admitForm(r.Context(), id, func(ctx context.Context) error {
		var err error
		fields, err = s.cfg.Forms.Fields(ctx, req.pdf)
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if fields == nil {
		fields = []forms.Field{}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"fields": fields})
}

// formFill is POST /v1/forms/fill.
func (s *Server) formFill(w http.ResponseWriter, r *http.Request) {
	id, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req, err := s.readFormRequest(w, r, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var res *forms.Result
	err = s.admitForm(r.Context(), id, func(ctx context.Context) error {
		var err error
		res, err = s.cfg.Forms.Fill(ctx, req.pdf, req.values, nil)
		if err == nil && res.TeX != nil {
			s.obs.ObserveRenderMemory(res.TeX.MaxRSS)
		}
		return err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "form filled", "request_id", requestID(r.Context()), "user", id.user, "tenant", id.tenant,
		"pages", res.Pages, "fields", res.Fields, "filled", res.Filled, "bytes", len(res.PDF))
	h := w.Header()
	h.Set("Content-Type", "application/pdf")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", `attachment; filename="filled.pdf"`)
	h.Set("Content-Length", strconv.Itoa(len(res.PDF)))
	h.Set("X-Outprint-Pages", strconv.Itoa(res.Pages))
	w.WriteHeader(http.StatusOK)
	w.Write(res.PDF)
}
