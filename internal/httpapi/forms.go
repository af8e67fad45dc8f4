package httpapi

import (
	"context"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
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
	name := strings.TrimSpace(path.Base(strings.ReplaceAll(fileName, "\\", "/")))
	if ext := path.Ext(name); strings.EqualFold(ext, ".pdf") {
		name = strings.TrimSuffix(name, ext)
	}
	if name == "" || name == "." || name == "/" {
		name = "form"
	}
	return name + "-filled"
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
	mr, err := r.MultipartReader()
	if err != nil {
		return formRequest{}, httperr.BadRequest("", "the multipart body cannot be read: "+err.Error())
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
				return formRequest{}, httperr.BadRequest("pdf", "send one pdf part")
			}
			havePDF = true
			req.name = filledName(part.FileName())
			if req.pdf, err = readFormPDF(r, part); err != nil {
				return formRequest{}, err
			}
		case "values":
			if err := valuesAllowed(wantValues, haveValues); err != nil {
				return formRequest{}, err
			}
			haveValues = true
			if req.values, err = io.ReadAll(io.LimitReader(part, forms.MaxValuesBytes+1)); err != nil {
				return formRequest{}, partError(r, err)
			}
		default:
			return formRequest{}, httperr.BadRequest(part.FormName(), fmt.Sprintf("unknown part %q: use pdf and values", part.FormName()))
		}
	}
	// A legal epilogue may follow the closing boundary. It is read (within
	// the body's bound and deadline) so that the body ends: net/http
	// watches the connection for the client leaving only from there, and
	// a client gone must cancel the request and kill its qpdf (issue 24: an
	// epilogue kept qpdf running 32.6 s for nobody).
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return formRequest{}, partError(r, err)
	}
	return req, formPartsComplete(havePDF, wantValues && !haveValues)
}

// readFormPDF reads the pdf part, at most limits.MaxPDFBytes.
func readFormPDF(r *http.Request, part *multipart.Part) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(part, limits.MaxPDFBytes+1))
	if err != nil {
		return nil, partError(r, err)
	}
	if len(b) > limits.MaxPDFBytes {
		return nil, &limits.Error{Kind: limits.KindTooLarge, Problems: []limits.Problem{{
			Field: "pdf", Source: limits.SourceDocument, Code: limits.CodeTooLarge,
			Message: fmt.Sprintf("the PDF is too large: more than %d bytes", limits.MaxPDFBytes),
		}}}
	}
	return b, nil
}

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
	id, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.enter(id)
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
	id, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.enter(id) // before the body, as formFields
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
	h := w.Header()
	h.Set("Content-Type", "application/pdf")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", contentDisposition(req.name))
	h.Set("Content-Length", strconv.Itoa(len(res.PDF)))
	h.Set("X-Outprint-Pages", strconv.Itoa(res.Pages))
	w.WriteHeader(http.StatusOK)
	// The status is sent: a failed write is a client gone, with no one to tell.
	_, _ = w.Write(res.PDF)
}
