package httpapi

import (
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
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
	id, t, err := s.admit(r)
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
	writePDF(w, res.PDF, req.name, res.Pages)
}

// uploadName is an upload's file name without its folder and, where
// strip(extension) says so, its extension; fallback when that leaves
// nothing.
func uploadName(fileName string, strip func(ext string) bool, fallback string) string {
	name := strings.TrimSpace(path.Base(strings.ReplaceAll(fileName, "\\", "/")))
	if ext := path.Ext(name); strip(ext) {
		name = strings.TrimSuffix(name, ext)
	}
	if name == "" || name == "." || name == "/" {
		name = fallback
	}
	return name
}

// readOffice reads a conversion request's body (a multipart file part,
// an optional metadata part and, when callback is not nil, a callbackUrl
// part), then recognises the file and reads the options within t's check
// budget.
func (s *Server) readOffice(w http.ResponseWriter, r *http.Request, t *worker.Ticket, callback **string) (req officeRequest, err error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return officeRequest{}, errOfficeMultipart
	}
	lift := s.bodyDeadline(w)
	defer func() { lift(err) }()
	if r.ContentLength > maxOfficeBodyBytes {
		return officeRequest{}, errOfficeTooLarge
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxOfficeBodyBytes)
	var haveFile, haveMeta bool
	var meta []byte
	err = eachPart(r, func(part *multipart.Part) error {
		var err error
		switch name := part.FormName(); {
		case name == "file":
			if haveFile {
				return httperr.BadRequest("file", "send one file part")
			}
			haveFile = true
			req.fileName = part.FileName()
			req.name = uploadName(req.fileName, func(string) bool { return true }, "document")
			req.doc, err = readPart(r, part, limits.MaxOfficeBytes, errOfficeTooLarge)
		case name == "metadata":
			if haveMeta {
				return httperr.BadRequest("metadata", "send one metadata part")
			}
			haveMeta = true
			meta, err = readPart(r, part, maxMetadataBytes,
				httperr.BadRequest("metadata", fmt.Sprintf("the metadata part is larger than %d bytes", maxMetadataBytes)))
		case name == "callbackUrl" && callback != nil:
			u := &uploadReader{r: r, callback: callback}
			err = u.callbackURL(part)
		default:
			err = httperr.BadRequest(name, fmt.Sprintf("unknown part %q: use file and metadata", name))
		}
		return err
	})
	if err != nil {
		return officeRequest{}, err
	}
	if !haveFile {
		return officeRequest{}, httperr.BadRequest("file", "the file part is required: the Office document to convert")
	}
	req.format, req.options, err = t.CheckOffice(r.Context(), req.doc, req.fileName, meta)
	return req, err
}

// errOfficeTooLarge refuses a file over limits.MaxOfficeBytes.
var errOfficeTooLarge = &limits.Error{Kind: limits.KindTooLarge, Problems: []limits.Problem{{
	Field: "file", Source: limits.SourceDocument, Code: limits.CodeTooLarge,
	Message: fmt.Sprintf("the file is too large to convert: more than %d bytes (50 MiB)", limits.MaxOfficeBytes),
}}}

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
		return jobs.Input{}, worker.ErrOfficeUnavailable
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
