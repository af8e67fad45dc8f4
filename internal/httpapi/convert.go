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

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/worker"
)

// Office documents (issue 28): POST /v1/convert (part file, optional part
// metadata with paper and landscape) answers the PDF like /v1/render, and
// POST /v1/jobs with the same file part is an office job. Both go through
// SPEC §4's order: the user counted before the body is read, the file
// recognised by its content (office.Detect, in a check place within the
// check budget: 415 for what is not an Office document, 422 encrypted or
// damaged, 413 past a bound), then a slot from the render capacity (429
// with Retry-After when full) and the conversion under the render
// timeout (worker.Ticket.Convert).

// maxOfficeBodyBytes bounds a conversion request: the file, the metadata
// and the multipart framing (and a job's callbackUrl).
const maxOfficeBodyBytes = limits.MaxOfficeBytes + maxMetadataBytes + maxCallbackPart + 1<<20

// officeRequest is a read conversion request.
type officeRequest struct {
	doc []byte
	// name is the file part's name without its folder and extension
	// ("document" when it has none): the PDF is NAME.pdf.
	name     string
	fileName string
	format   office.Format
	options  office.Options
}

// convertAPI is POST /v1/convert.
func (s *Server) convertAPI(w http.ResponseWriter, r *http.Request) {
	id, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.enter(id) // before the body (issue 24)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer t.Done()
	req, err := s.readOffice(w, r, t, nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := t.Convert(r.Context(), s.cfg.Office, req.doc, req.format, req.options)
	t.Done() // the slot is free before a large PDF goes to a slow client
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "converted", "request_id", httperr.RequestID(r.Context()), "user", id.user, "tenant", id.tenant,
		"format", req.format.Name, "pages", res.Pages, "in_bytes", len(req.doc), "bytes", len(res.PDF))
	h := w.Header()
	h.Set("Content-Type", "application/pdf")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", contentDisposition(req.name))
	h.Set("Content-Length", strconv.Itoa(len(res.PDF)))
	h.Set("X-Outprint-Pages", strconv.Itoa(res.Pages))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(res.PDF) // a client that left needs no answer
}

// officeName is the name (without ".pdf") a converted document downloads
// under: the upload's name without its folder and extension.
func officeName(fileName string) string {
	name := strings.TrimSpace(path.Base(strings.ReplaceAll(fileName, "\\", "/")))
	name = strings.TrimSuffix(name, path.Ext(name))
	if name == "" || name == "." || name == "/" {
		name = "document"
	}
	return name
}

// readOffice reads a conversion request's body (a multipart file part,
// an optional metadata part and, when callback is not nil, a callbackUrl
// part), recognises the file under t's check budget and reads the
// options.
func (s *Server) readOffice(w http.ResponseWriter, r *http.Request, t *worker.Ticket, callback **string) (officeRequest, error) {
	req, meta, err := s.readOfficeBody(w, r, callback)
	if err != nil {
		return officeRequest{}, err
	}
	err = t.CheckWith(r.Context(), "its file", func(context.Context) error {
		var err error
		req.format, err = office.Detect(req.doc, req.fileName)
		return err
	})
	if err != nil {
		return officeRequest{}, err
	}
	if req.options, err = worker.OfficeOptions(meta); err != nil {
		return officeRequest{}, err
	}
	return req, nil
}

// readOfficeBody reads the multipart body of a conversion.
func (s *Server) readOfficeBody(w http.ResponseWriter, r *http.Request, callback **string) (req officeRequest, meta []byte, err error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return officeRequest{}, nil, errOfficeMultipart
	}
	lift := s.bodyDeadline(w)
	defer func() { lift(err) }()
	if r.ContentLength > maxOfficeBodyBytes {
		return officeRequest{}, nil, officeTooLarge(r.ContentLength)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxOfficeBodyBytes)
	mr, err := r.MultipartReader()
	if err != nil {
		return officeRequest{}, nil, httperr.BadRequest("", "the multipart body cannot be read: "+err.Error())
	}
	var haveFile, haveMeta bool
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return officeRequest{}, nil, partError(r, err)
		}
		switch name := part.FormName(); {
		case name == "file":
			if haveFile {
				return officeRequest{}, nil, httperr.BadRequest("file", "send one file part")
			}
			haveFile = true
			req.fileName = part.FileName()
			req.name = officeName(req.fileName)
			if req.doc, err = readOfficeFile(r, part); err != nil {
				return officeRequest{}, nil, err
			}
		case name == "metadata":
			if haveMeta {
				return officeRequest{}, nil, httperr.BadRequest("metadata", "send one metadata part")
			}
			haveMeta = true
			if meta, err = io.ReadAll(io.LimitReader(part, maxMetadataBytes+1)); err != nil {
				return officeRequest{}, nil, partError(r, err)
			}
			if len(meta) > maxMetadataBytes {
				return officeRequest{}, nil, httperr.BadRequest("metadata", fmt.Sprintf("the metadata part is larger than %d bytes", maxMetadataBytes))
			}
		case name == "callbackUrl" && callback != nil:
			u := &uploadReader{r: r, callback: callback}
			if err := u.callbackURL(part); err != nil {
				return officeRequest{}, nil, err
			}
		default:
			return officeRequest{}, nil, httperr.BadRequest(name, fmt.Sprintf("unknown part %q: use file and metadata", name))
		}
	}
	// The epilogue is read so that the body ends and net/http watches for
	// the client leaving (as readFormRequest does).
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return officeRequest{}, nil, partError(r, err)
	}
	if !haveFile {
		return officeRequest{}, nil, httperr.BadRequest("file", "the file part is required: the Office document to convert")
	}
	return req, meta, nil
}

// readOfficeFile reads the file part, at most limits.MaxOfficeBytes.
func readOfficeFile(r *http.Request, part *multipart.Part) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(part, limits.MaxOfficeBytes+1))
	if err != nil {
		return nil, partError(r, err)
	}
	if len(b) > limits.MaxOfficeBytes {
		return nil, officeTooLarge(int64(len(b)))
	}
	return b, nil
}

// officeTooLarge is the 413 of a file over limits.MaxOfficeBytes.
func officeTooLarge(n int64) error {
	return &limits.Error{Kind: limits.KindTooLarge, Problems: []limits.Problem{{
		Field: "file", Source: limits.SourceDocument, Code: limits.CodeTooLarge,
		Message: fmt.Sprintf("the file is too large to convert: more than %d bytes (50 MiB)", min(n, int64(limits.MaxOfficeBytes))),
	}}}
}

// errOfficeMultipart answers a conversion that is not multipart.
var errOfficeMultipart = httperr.New(http.StatusUnsupportedMediaType, limits.Problem{Source: limits.SourceRequest, Code: httperr.CodeUnsupported,
	Message: "send multipart/form-data with the Office document in the part file (and optionally metadata: {\"paper\",\"landscape\"})"})

// officeJob reads an office job (POST /v1/jobs with a file part) and
// accepts it as /v1/convert would convert it: the file recognised and its
// options read, so that a file outprint cannot convert is answered at once
// instead of becoming a failed job. A server without LibreOffice refuses
// it here too.
func (s *Server) officeJob(w http.ResponseWriter, r *http.Request, c caller, a *worker.Ticket) (jobs.Input, error) {
	var callback *string
	req, err := s.readOffice(w, r, a, &callback)
	if err != nil {
		return jobs.Input{}, err
	}
	if s.cfg.Office == nil {
		return jobs.Input{}, worker.ErrOfficeNotInstalled
	}
	cb, err := s.jobCallback(r, c, callback)
	if err != nil {
		return jobs.Input{}, err
	}
	return jobs.Input{
		Name:     req.name + ".pdf",
		Office:   &jobs.OfficeInput{Doc: req.doc, Format: req.format.Name, Options: worker.OfficeOptionsJSON(req.options)},
		Callback: cb,
	}, nil
}
