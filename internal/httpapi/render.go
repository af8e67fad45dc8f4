package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
)

// Bounds of a request body: the Markdown, the images and some room for
// multipart headers and metadata. The exact limits are checked part by
// part; this bound only stops a client that streams without end.
const (
	maxMetadataBytes = 64 << 10
	maxBodyBytes     = limits.MaxMarkdownBytes + limits.MaxTotalImageBytes + limits.MaxImageBytes + 1<<20
	// JSON escaping can grow Markdown up to six times (\u00XX).
	maxJSONBytes = 6*limits.MaxMarkdownBytes + maxMetadataBytes
)

// identity is a confirmed user (SPEC §5 Authentication).
type identity struct{ user, tenant string }

// authenticate confirms the API key of the request, or lets it in as
// "local" in anonymous mode. In anonymous mode a request that does send a
// key is still checked: a client that means to authenticate should learn
// that its key is not accepted here, not be served as someone else.
func (s *Server) authenticate(r *http.Request) (identity, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if s.cfg.Anonymous {
			return identity{user: "local", tenant: "local"}, nil
		}
		return identity{}, errNoCredentials
	}
	key, ok := bearerToken(h)
	if !ok {
		return identity{}, errNoCredentials
	}
	if s.cfg.Auth == nil {
		return identity{}, errUnknownKey
	}
	user, tenant, ok := s.cfg.Auth.LookupKey(key)
	if !ok {
		return identity{}, errUnknownKey
	}
	return identity{user: user, tenant: tenant}, nil
}

// renderAPI is POST /v1/render, in the order of SPEC §4 with the bounds of
// issue 10: authenticate → count the user (before the body is read) →
// read the body → cheap checks within the check budget → fetch and
// validate images → take a slot → render.
func (s *Server) renderAPI(w http.ResponseWriter, r *http.Request) {
	id, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	a, err := s.enter(id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer a.done()
	sp := s.newSpool()
	defer sp.remove()
	req, err := s.readRenderRequest(w, r, sp, nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req.Images = images.Chain(req.Images, s.cfg.RemoteImages)
	checked, err := s.check(r.Context(), a, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.fetchAndRender(r, a, checked)
	a.done() // the slot is free before a large PDF goes to a slow client
	sp.remove()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "rendered", "request_id", requestID(r.Context()), "user", id.user, "tenant", id.tenant,
		"pages", res.Pages, "runs", res.Runs, "bytes", len(res.PDF), "render_ms", res.Duration.Milliseconds(),
		"cpu_ms", res.CPU.Milliseconds(), "warnings", len(res.Warnings))
	writePDF(w, res)
}

// Render results recorded besides "ok" and the limits codes: the client
// went away mid-render, or the render failed in a way that is ours.
const (
	resultCanceled = "canceled"
	resultInternal = "internal"
)

// fetchAndRender fetches the images, takes a slot and renders, for a
// request already counted against its user (a). The caller gives the
// ticket back (a.done) on every path: success, error, panic (its deferred
// done runs while the panic unwinds), a client that disconnects (its
// context ends the wait or the render) and timeouts. a.took is set to the
// render's duration for the Retry-After estimate; it stays 0 (records
// nothing) when no render ran, it panicked, or the client left, since none
// of those says how long a render takes.
func (s *Server) fetchAndRender(r *http.Request, a *admitted, checked *render.Checked) (*render.Result, error) {
	ctx := r.Context()
	prepared, err := s.cfg.Pipeline.Fetch(ctx, checked)
	if err != nil {
		return nil, err
	}
	ticket := a.t
	err = ticket.Acquire(ctx)
	s.obs.ObserveQueueWait(ticket.Waited())
	if err != nil {
		s.refused(err)
		return nil, err
	}

	start := time.Now()
	finished := false
	defer func() {
		if !finished { // the renderer panicked; the panic goes on unwinding
			s.obs.ObserveRender(time.Since(start), resultInternal)
		}
	}()
	res, err := s.renderer.Render(ctx, prepared, nil)
	finished = true
	d := time.Since(start)
	result := renderResult(ctx, err)
	s.obs.ObserveRender(d, result)
	if res != nil {
		s.obs.ObserveRenderMemory(res.MaxRSS)
	}
	if result != resultCanceled && result != resultInternal {
		a.took = d
	}
	return res, err
}

// renderResult is the metrics label of a render's outcome: "ok", the code
// of a client-facing error, "canceled" or "internal". The set is bounded.
func renderResult(ctx context.Context, err error) string {
	var le *limits.Error
	switch {
	case err == nil:
		return "ok"
	case ctx.Err() != nil:
		return resultCanceled
	case errors.As(err, &le) && le.Code() != "":
		return le.Code()
	}
	return resultInternal
}

// refused counts a 429 for metrics.
func (s *Server) refused(err error) {
	var ref *admission.Refusal
	if errors.As(err, &ref) {
		s.obs.Refused(ref.Code)
	}
}

// writePDF answers with the PDF: never cached (SPEC §4, no render cache),
// named after the title.
func writePDF(w http.ResponseWriter, res *render.Result) {
	h := w.Header()
	h.Set("Content-Type", "application/pdf")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", contentDisposition(res.Title))
	h.Set("Content-Length", strconv.Itoa(len(res.PDF)))
	h.Set("X-Outprint-Pages", strconv.Itoa(res.Pages))
	w.WriteHeader(http.StatusOK)
	w.Write(res.PDF)
}

// contentDisposition names the file after the title: a plain ASCII name
// for old clients and the exact UTF-8 name in filename* (RFC 6266, RFC
// 8187). The title is user text, so both are built from an allowlist of
// characters: nothing in it can end the header value or add a parameter.
func contentDisposition(title string) string {
	// The title is the first heading unless metadata names one, and a
	// heading can be 500 KB: a header that long makes clients drop the
	// whole answer, so the name is cut at maxFileNameRunes.
	if n := 0; len(title) > maxFileNameRunes {
		for i := range title {
			if n == maxFileNameRunes {
				title = strings.TrimRight(title[:i], " ")
				break
			}
			n++
		}
	}
	var ascii, ext strings.Builder
	for _, r := range title {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			continue // control characters have no place in a file name
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == ' ', r == '-', r == '_', r == '.', r == ',', r == '(', r == ')':
			ascii.WriteRune(r)
		default:
			ascii.WriteByte('_')
		}
		var buf [utf8.UTFMax]byte
		for _, b := range buf[:utf8.EncodeRune(buf[:], r)] {
			if isAttrChar(b) {
				ext.WriteByte(b)
			} else {
				fmt.Fprintf(&ext, "%%%02X", b)
			}
		}
	}
	name := strings.Trim(ascii.String(), " .")
	if name == "" || strings.Trim(name, "_") == "" {
		name = "document"
	}
	if name == title || ext.Len() == 0 {
		return fmt.Sprintf(`attachment; filename="%s.pdf"`, name)
	}
	return fmt.Sprintf(`attachment; filename="%s.pdf"; filename*=UTF-8''%s.pdf`, name, ext.String())
}

// maxFileNameRunes bounds the file name of Content-Disposition, in
// characters of the title (the encoded filename* can be up to 12 bytes per
// character, well within header limits).
const maxFileNameRunes = 200

// isAttrChar reports whether b may stand unencoded in an RFC 8187
// ext-value (attr-char).
func isAttrChar(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("!#$&+-.^_`|~", b) >= 0
}

// readRenderRequest reads the body of POST /v1/render: multipart
// (document, metadata, asset parts) or JSON {"markdown","metadata"}.
// Markdown over the limit is refused (413 too_large) before anything is
// parsed: the document part is read through a limit one byte above it, and
// a body whose declared length cannot fit is refused before it is read.
// Reading is bounded in time by BodyTimeout.
//
// Asset parts go to files of sp as they arrive (never whole in memory).
func (s *Server) readRenderRequest(w http.ResponseWriter, r *http.Request, sp *spool, callback **string) (req render.Request, err error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return render.Request{}, errUnsupported
	}
	// The deadline covers the body only. It is lifted once the body is
	// read: net/http watches an idle connection for the client going away
	// with a read, and a deadline passing there would cancel the request's
	// context in the middle of its render.
	//
	// When the body timed out the deadline stays: net/http reads what is
	// left of an unread body before it answers, and that read must fail
	// at once rather than wait for the stalled client.
	rc := http.NewResponseController(w)
	if derr := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)); derr == nil {
		defer func() {
			if !errors.Is(err, errBodyTimeout) {
				rc.SetReadDeadline(time.Time{})
			}
		}()
	}
	switch mt {
	case "multipart/form-data":
		if r.ContentLength > maxBodyBytes {
			return render.Request{}, errRequestTooBig
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		return readMultipart(r, sp, callback)
	case "application/json":
		if r.ContentLength > maxJSONBytes {
			return render.Request{}, limits.TooLarge(r.ContentLength)
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxJSONBytes)
		return readJSON(r)
	}
	return render.Request{}, errUnsupported
}

func readJSON(r *http.Request) (render.Request, error) {
	var body struct {
		Markdown *string         `json:"markdown"`
		Metadata json.RawMessage `json:"metadata"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&body)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return render.Request{}, limits.TooLarge(mbe.Limit)
		}
		if isTimeout(err) {
			return render.Request{}, errBodyTimeout
		}
		if clientGone(r.Context()) {
			return render.Request{}, r.Context().Err()
		}
		return render.Request{}, badRequest("", `the body is not a JSON object {"markdown": string, "metadata": object}: `+err.Error())
	}
	if body.Markdown == nil {
		return render.Request{}, badRequest("markdown", "markdown is required")
	}
	if len(*body.Markdown) > limits.MaxMarkdownBytes {
		return render.Request{}, limits.TooLarge(int64(len(*body.Markdown)))
	}
	meta := []byte(body.Metadata)
	if t := bytes.TrimSpace(meta); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		meta = nil
	}
	return render.Request{Name: "document.md", Markdown: []byte(*body.Markdown), Metadata: meta, Images: images.Assets{}}, nil
}

// readMultipart reads a multipart render request. callback, when not nil,
// receives the value of a callbackUrl part (POST /v1/jobs); with nil such
// a part is unknown.
func readMultipart(r *http.Request, sp *spool, callback **string) (render.Request, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return render.Request{}, badRequest("", "the multipart body cannot be read: "+err.Error())
	}
	req := render.Request{Name: "document.md"}
	assets := sp.files
	var haveDoc, haveMeta bool
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return render.Request{}, partError(r, err)
		}
		switch part.FormName() {
		case "document":
			if haveDoc {
				return render.Request{}, badRequest("document", "send one document part")
			}
			haveDoc = true
			b, err := io.ReadAll(io.LimitReader(part, limits.MaxMarkdownBytes+1))
			if err != nil {
				return render.Request{}, partError(r, err)
			}
			if len(b) > limits.MaxMarkdownBytes {
				return render.Request{}, limits.TooLarge(int64(len(b)))
			}
			req.Markdown = b
			if name := rawFileName(part); name != "" {
				req.Name = path.Base(name)
			}
		case "metadata":
			if haveMeta {
				return render.Request{}, badRequest("metadata", "send one metadata part")
			}
			haveMeta = true
			b, err := io.ReadAll(io.LimitReader(part, maxMetadataBytes+1))
			if err != nil {
				return render.Request{}, partError(r, err)
			}
			if len(b) > maxMetadataBytes {
				return render.Request{}, badRequest("metadata", fmt.Sprintf("the metadata part is larger than %d bytes", maxMetadataBytes))
			}
			req.Metadata = b
		case "asset":
			name := rawFileName(part)
			if name == "" {
				return render.Request{}, badRequest("asset", "an asset part needs a file name: the path the Markdown uses")
			}
			if _, dup := assets[name]; dup {
				return render.Request{}, badRequest("asset", fmt.Sprintf("asset %q is sent twice", name))
			}
			if len(assets) >= limits.MaxImages {
				return render.Request{}, limits.Invalid(limits.Problem{Field: "asset", Source: limits.SourceImage, Code: limits.CodeImage,
					Message: fmt.Sprintf("too many asset parts: at most %d images per document", limits.MaxImages)})
			}
			if err := sp.add(name, part); err != nil {
				return render.Request{}, partError(r, err)
			}
		case "callbackUrl":
			if callback == nil {
				return render.Request{}, badRequest(part.FormName(), fmt.Sprintf("unknown part %q: use document, metadata and asset", part.FormName()))
			}
			if *callback != nil {
				return render.Request{}, badRequest("callbackUrl", "send one callbackUrl part")
			}
			b, err := io.ReadAll(io.LimitReader(part, maxCallbackPart+1))
			if err != nil {
				return render.Request{}, partError(r, err)
			}
			if len(b) > maxCallbackPart {
				return render.Request{}, badRequest("callbackUrl", fmt.Sprintf("the callbackUrl part is larger than %d bytes", maxCallbackPart))
			}
			v := string(b)
			*callback = &v
		default:
			return render.Request{}, badRequest(part.FormName(), fmt.Sprintf("unknown part %q: use document, metadata and asset", part.FormName()))
		}
	}
	if !haveDoc {
		return render.Request{}, badRequest("document", "the document part is required")
	}
	req.Images = assets
	return req, nil
}

// partError sorts a failure to read the multipart body: over the body's
// bound (413), too slow (408), the client gone, or a malformed body (400).
func partError(r *http.Request, err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return errRequestTooBig
	case isTimeout(err):
		return errBodyTimeout
	case clientGone(r.Context()):
		return r.Context().Err()
	}
	return badRequest("", "the multipart body cannot be read: "+err.Error())
}

// errBodyTimeout is a body that did not arrive within BodyTimeout.
var errBodyTimeout = &requestError{status: http.StatusRequestTimeout,
	message: "the request body did not arrive in time; send it without pauses"}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// rawFileName returns the file name of a part as the client sent it.
// multipart.Part.FileName keeps only the base name, but an asset's name is
// the path the Markdown uses ("img/a.png").
func rawFileName(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}
