package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"time"

	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/worker"
)

// Forms jobs: POST /v1/jobs with the parts pdf and values is a form to fill
// and flatten, accepted like a Markdown job (202, the job lifecycle, the
// idempotency digest over the PDF bytes and the values) and run by the same
// workers, which hold an admission slot while they fill.

// firstPart is the name of a multipart body's first part ("" when the
// body is not multipart or has none). It peeks at the start of the body
// without consuming it: the body is replaced by a reader that still
// yields every byte.
func (s *Server) firstPart(w http.ResponseWriter, r *http.Request) string {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return ""
	}
	// The body's deadline covers the peek too; the readers below set it
	// again for the whole body. A writer without deadlines
	// (ErrNotSupported) reads without one.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	br := bufio.NewReaderSize(r.Body, 8<<10)
	r.Body = struct {
		io.Reader
		io.Closer
	}{br, r.Body}
	head, _ := br.Peek(8 << 10)
	part, err := multipart.NewReader(bytes.NewReader(head), params["boundary"]).NextPart()
	if err != nil {
		return ""
	}
	return part.FormName()
}

// isFormUpload reports whether a multipart job's first part is pdf or
// values.
func (s *Server) isFormUpload(first string) bool {
	return s.cfg.Forms != nil && (first == "pdf" || first == "values")
}

// isOfficeUpload reports whether a multipart job's first part is file:
// an Office document (convert.go). Its metadata part, if any, comes after.
func isOfficeUpload(first string) bool { return first == "file" }

// formJob reads a forms job and checks it as acceptance does: the form is
// read (by qpdf, sandboxed) and every value checked, so a bad form or bad
// values are answered 422 before a job exists. The read runs under the
// caller's ticket like the cheap checks of a Markdown job: in a check
// place, within the check budget (worker.Ticket.CheckWith).
func (s *Server) formJob(w http.ResponseWriter, r *http.Request, a *worker.Ticket) (jobs.Input, error) {
	req, err := s.readFormRequest(w, r, true)
	if err != nil {
		return jobs.Input{}, err
	}
	err = a.CheckWith(r.Context(), "its form", func(ctx context.Context) error {
		return s.cfg.Forms.Check(ctx, req.pdf, req.values)
	})
	if err != nil {
		return jobs.Input{}, err
	}
	return jobs.Input{Name: req.name + ".pdf", Form: &jobs.FormInput{PDF: req.pdf, Values: req.values}}, nil
}
