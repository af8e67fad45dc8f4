package httpapi

import (
	"context"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
)

// The form routes: POST /v1/forms/fields (part pdf) lists a form's fields,
// POST /v1/forms/fill (parts pdf and values) answers the filled and
// flattened PDF. Both go through admission like a render: the user's count
// (tenant and user, before the body is read), then a slot, since reading a
// form runs qpdf and filling it runs TeX.

// maxFormBodyBytes bounds a form request: the PDF, the values and the
// multipart framing.
const maxFormBodyBytes = limits.MaxPDFBytes + forms.MaxValuesBytes + 1<<20

// formRoutes adds the form routes when a Filler is configured.
func (s *Server) formRoutes(mux *http.ServeMux) {
	if s.cfg.Forms == nil {
		return
	}
	mux.Handle("/v1/forms/fields", s.ans.Method(http.MethodPost, s.formFields))
	mux.Handle("/v1/forms/fill", s.ans.Method(http.MethodPost, s.formFill))
}

// formRequest is a read form request.
type formRequest struct {
	pdf, values []byte
	// name is the pdf part's file name without its folder and ".pdf"
	// ("form" when it has none): the filled PDF is NAME-filled.pdf.
	name string
}

// filledName is the name (without ".pdf") a filled form downloads under,
// on the route and as a job's result: NAME-filled.
func filledName(fileName string) string {
	return uploadName(fileName, func(ext string) bool { return strings.EqualFold(ext, ".pdf") }, "form") + "-filled"
}

// readFormRequest reads the multipart body: a pdf part and, when
// wantValues, a values part (JSON).
func (s *Server) readFormRequest(w http.ResponseWriter, r *http.Request, wantValues bool) (req formRequest, err error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return formRequest{}, errUnsupported
	}
	lift := s.bodyDeadline(w)
	defer func() { lift(err) }()
	if r.ContentLength > maxFormBodyBytes {
		return formRequest{}, errRequestTooBig
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBodyBytes)
	var havePDF, haveValues bool
	err = eachPart(r, func(part *multipart.Part) error {
		var err error
		switch part.FormName() {
		case "pdf":
			if havePDF {
				return httperr.BadRequest("pdf", "send one pdf part")
			}
			havePDF = true
			req.name = filledName(part.FileName())
			req.pdf, err = readPart(r, part, limits.MaxPDFBytes, errFormTooLarge)
		case "values":
			if err := valuesAllowed(wantValues, haveValues); err != nil {
				return err
			}
			haveValues = true
			if req.values, err = io.ReadAll(io.LimitReader(part, forms.MaxValuesBytes+1)); err != nil {
				err = partError(r, err)
			}
		default:
			err = httperr.BadRequest(part.FormName(), fmt.Sprintf("unknown part %q: use pdf and values", part.FormName()))
		}
		return err
	})
	if err != nil {
		return formRequest{}, err
	}
	return req, formPartsComplete(havePDF, wantValues && !haveValues)
}

// errFormTooLarge refuses a pdf part over limits.MaxPDFBytes.
var errFormTooLarge = &limits.Error{Kind: limits.KindTooLarge, Problems: []limits.Problem{{
	Field: "pdf", Source: limits.SourceDocument, Code: limits.CodeTooLarge,
	Message: fmt.Sprintf("the PDF is too large: more than %d bytes", limits.MaxPDFBytes),
}}}

// valuesAllowed refuses a values part on the route that takes none, and a
// second one.
func valuesAllowed(wantValues, haveValues bool) error {
	switch {
	case !wantValues:
		return httperr.BadRequest("values", "this route takes only the pdf part")
	case haveValues:
		return httperr.BadRequest("values", "send one values part")
	}
	return nil
}

// formPartsComplete refuses a form request without its pdf part, or
// without the values it needs.
func formPartsComplete(havePDF, missingValues bool) error {
	switch {
	case !havePDF:
		return httperr.BadRequest("pdf", "the pdf part is required")
	case missingValues:
		return httperr.BadRequest("values", "the values part is required (a JSON object; {} keeps every value)")
	}
	return nil
}

// formFields is POST /v1/forms/fields. The user is counted before a byte
// of the body is read (issue 24: sixteen 48 MB uploads of one user were
// all read before fifteen were refused), and the count is held until the
// answer, with a slot while qpdf reads the form (worker.Ticket.Do).
func (s *Server) formFields(w http.ResponseWriter, r *http.Request) {
	_, t, err := s.admit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer t.Done()
	req, err := s.readFormRequest(w, r, false)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var fields []forms.Field
	err = t.Do(r.Context(), func(ctx context.Context) (int64, error) {
		var err error
		fields, err = s.cfg.Forms.Fields(ctx, req.pdf)
		return 0, err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if fields == nil {
		fields = []forms.Field{}
	}
	w.Header().Set("Cache-Control", "no-store")
	httperr.WriteJSON(w, http.StatusOK, map[string]any{"fields": fields})
}

// formFill is POST /v1/forms/fill.
func (s *Server) formFill(w http.ResponseWriter, r *http.Request) {
	id, t, err := s.admit(r) // before the body, as formFields
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer t.Done()
	req, err := s.readFormRequest(w, r, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var res *forms.Result
	err = t.Do(r.Context(), func(ctx context.Context) (int64, error) {
		var err error
		res, err = s.cfg.Forms.Fill(ctx, req.pdf, req.values, nil)
		if err == nil && res.TeX != nil {
			return res.TeX.MaxRSS, nil
		}
		return 0, err
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "form filled", "request_id", httperr.RequestID(r.Context()), "user", id.user, "tenant", id.tenant,
		"pages", res.Pages, "fields", res.Fields, "filled", res.Filled, "bytes", len(res.PDF))
	writePDF(w, res.PDF, req.name, res.Pages)
}
