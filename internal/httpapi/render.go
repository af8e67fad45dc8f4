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
	"unicode"
	"unicode/utf8"

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/worker"
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
// validate images → take a slot → render (worker.Ticket).
func (s *Server) renderAPI(w http.ResponseWriter, r *http.Request) {
	id, t, err := s.admit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer t.Done()
	sp := s.newSpool()
	defer sp.remove()
	req, err := s.readRenderRequest(w, r, sp, nil)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	req.Images = images.Chain(req.Images, s.cfg.RemoteImages)
	res, err := s.checkAndRender(r.Context(), t, req)
	t.Done() // the slot is free before a large PDF goes to a slow client
	sp.remove()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "rendered", "request_id", httperr.RequestID(r.Context()), "user", id.user, "tenant", id.tenant,
		"pages", res.Pages, "runs", res.Runs, "bytes", len(res.PDF), "render_ms", res.Duration.Milliseconds(),
		"cpu_ms", res.CPU.Milliseconds(), "warnings", len(res.Warnings))
	writePDF(w, res.PDF, res.Title, res.Pages)
}

// checkAndRender is the rest of SPEC §4 for a request counted by t: the
// cheap checks, then the images, a slot and the render.
func (s *Server) checkAndRender(ctx context.Context, t *worker.Ticket, req render.Request) (*render.Result, error) {
	checked, err := t.Check(ctx, req)
	if err != nil {
		return nil, err
	}
	return t.Render(ctx, checked)
}

// writePDF answers with a PDF of pages pages: never cached (SPEC §4, no
// render cache), named after title.
func writePDF(w http.ResponseWriter, pdf []byte, title string, pages int) {
	h := w.Header()
	h.Set("Content-Type", "application/pdf")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", contentDisposition(title))
	h.Set("Content-Length", strconv.Itoa(len(pdf)))
	h.Set("X-Outprint-Pages", strconv.Itoa(pages))
	w.WriteHeader(http.StatusOK)
	// The status is sent: a failed write is a client gone, with no one to tell.
	_, _ = w.Write(pdf)
}

// contentDisposition names the file after the title: a plain ASCII name
// for old clients and the exact UTF-8 name in filename* (RFC 6266, RFC
// 8187). The title is user text, so both are built from an allowlist of
// characters: nothing in it can end the header value or add a parameter.
func contentDisposition(title string) string {
	title = cutRunes(title, maxFileNameRunes)
	var ascii, ext strings.Builder
	for _, r := range title {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Bidi_Control, r) || r == 0x2028 || r == 0x2029 {
			// Control characters have no place in a file name, and a
			// bidirectional override (U+202E) makes "report‮fdp.exe"
			// show as "reportexe.pdf".
			continue
		}
		ascii.WriteByte(asciiFileChar(r))
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

// cutRunes cuts s to at most n characters, and the spaces before the cut.
// The title is the first heading unless metadata names one, and a heading
// can be 500 KB: a header that long makes clients drop the whole answer.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	count := 0
	for i := range s {
		if count == n {
			return strings.TrimRight(s[:i], " ")
		}
		count++
	}
	return s
}

// asciiFileChar is r in the plain file name: itself when it is a letter,
// digit or harmless punctuation, '_' otherwise.
func asciiFileChar(r rune) byte {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
		r == ' ', r == '-', r == '_', r == '.', r == ',', r == '(', r == ')':
		return byte(r)
	}
	return '_'
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
	lift := s.bodyDeadline(w) // the body only, not the render
	defer func() { lift(err) }()
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
			return render.Request{}, httperr.ErrBodyTimeout
		}
		if httperr.ClientGone(r.Context()) {
			return render.Request{}, r.Context().Err()
		}
		return render.Request{}, httperr.BadRequest("", `the body is not a JSON object {"markdown": string, "metadata": object}: `+err.Error())
	}
	if body.Markdown == nil {
		return render.Request{}, httperr.BadRequest("markdown", "markdown is required")
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
	u := &uploadReader{r: r, sp: sp, callback: callback, req: render.Request{Name: "document.md"}}
	if err := eachPart(r, u.part); err != nil {
		return render.Request{}, err
	}
	if !u.haveDoc {
		return render.Request{}, httperr.BadRequest("document", "the document part is required")
	}
	u.req.Images = sp.files
	return u.req, nil
}

// eachPart hands each part of r's multipart body to take, in order, then
// reads the epilogue. A legal epilogue may follow the closing boundary; it
// is read (within the body's bound and deadline) so that the body ends:
// net/http watches the connection for the client leaving only from there,
// and a client gone must cancel the request and kill its work (issue 24:
// an epilogue kept qpdf running 32.6 s for nobody).
func eachPart(r *http.Request, take func(*multipart.Part) error) error {
	mr, err := r.MultipartReader()
	if err != nil {
		return httperr.BadRequest("", "the multipart body cannot be read: "+err.Error())
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return partError(r, err)
		}
		if err := take(part); err != nil {
			return err
		}
	}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return partError(r, err)
	}
	return nil
}

// readPart reads a part of at most max bytes; a longer one is tooLarge.
func readPart(r *http.Request, part *multipart.Part, max int64, tooLarge error) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(part, max+1))
	if err != nil {
		return nil, partError(r, err)
	}
	if int64(len(b)) > max {
		return nil, tooLarge
	}
	return b, nil
}

// uploadReader takes the parts of one multipart render request.
type uploadReader struct {
	r                 *http.Request
	sp                *spool
	callback          **string
	req               render.Request
	haveDoc, haveMeta bool
}

// part takes one part: the document, the metadata, an asset, or (for a
// job) the callbackUrl.
func (u *uploadReader) part(part *multipart.Part) error {
	switch name := part.FormName(); {
	case name == "document":
		return u.document(part)
	case name == "metadata":
		return u.metadata(part)
	case name == "asset":
		return u.asset(part)
	case name == "callbackUrl" && u.callback != nil:
		return u.callbackURL(part)
	default:
		return httperr.BadRequest(name, fmt.Sprintf("unknown part %q: use document, metadata and asset", name))
	}
}

func (u *uploadReader) document(part *multipart.Part) error {
	if u.haveDoc {
		return httperr.BadRequest("document", "send one document part")
	}
	u.haveDoc = true
	b, err := io.ReadAll(io.LimitReader(part, limits.MaxMarkdownBytes+1))
	if err != nil {
		return partError(u.r, err)
	}
	if len(b) > limits.MaxMarkdownBytes {
		return limits.TooLarge(int64(len(b)))
	}
	u.req.Markdown = b
	if name := rawFileName(part); name != "" {
		u.req.Name = path.Base(name)
	}
	return nil
}

func (u *uploadReader) metadata(part *multipart.Part) error {
	if u.haveMeta {
		return httperr.BadRequest("metadata", "send one metadata part")
	}
	u.haveMeta = true
	b, err := io.ReadAll(io.LimitReader(part, maxMetadataBytes+1))
	if err != nil {
		return partError(u.r, err)
	}
	if len(b) > maxMetadataBytes {
		return httperr.BadRequest("metadata", fmt.Sprintf("the metadata part is larger than %d bytes", maxMetadataBytes))
	}
	u.req.Metadata = b
	return nil
}

// asset spools an image part to disk under the path the Markdown uses.
func (u *uploadReader) asset(part *multipart.Part) error {
	name := rawFileName(part)
	if name == "" {
		return httperr.BadRequest("asset", "an asset part needs a file name: the path the Markdown uses")
	}
	if _, dup := u.sp.files[name]; dup {
		return httperr.BadRequest("asset", fmt.Sprintf("asset %q is sent twice", name))
	}
	if len(u.sp.files) >= limits.MaxImages {
		return limits.Invalid(limits.Problem{Field: "asset", Source: limits.SourceImage, Code: limits.CodeImage,
			Message: fmt.Sprintf("too many asset parts: at most %d images per document", limits.MaxImages)})
	}
	if err := u.sp.add(name, part); err != nil {
		return partError(u.r, err)
	}
	return nil
}

func (u *uploadReader) callbackURL(part *multipart.Part) error {
	if *u.callback != nil {
		return httperr.BadRequest("callbackUrl", "send one callbackUrl part")
	}
	b, err := io.ReadAll(io.LimitReader(part, maxCallbackPart+1))
	if err != nil {
		return partError(u.r, err)
	}
	if len(b) > maxCallbackPart {
		return httperr.BadRequest("callbackUrl", fmt.Sprintf("the callbackUrl part is larger than %d bytes", maxCallbackPart))
	}
	v := string(b)
	*u.callback = &v
	return nil
}

// partError sorts a failure to read the multipart body: over the body's
// bound (413), too slow (408), the client gone, or a malformed body (400).
func partError(r *http.Request, err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return errRequestTooBig
	case isTimeout(err):
		return httperr.ErrBodyTimeout
	case httperr.ClientGone(r.Context()):
		return r.Context().Err()
	}
	return httperr.BadRequest("", "the multipart body cannot be read: "+err.Error())
}

// bodyDeadline bounds reading the request body by BodyTimeout. The
// returned lift takes the bound off once the body is read: net/http
// watches an idle connection for the client going away with a read, and a
// deadline passing there would cancel the request's context in the middle
// of its render. When the body timed out (err) the deadline stays: net/http
// reads what is left of an unread body before it answers, and that read
// must fail at once rather than wait for the stalled client.
func (s *Server) bodyDeadline(w http.ResponseWriter) (lift func(err error)) {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) != nil {
		return func(error) {}
	}
	return func(err error) {
		if !errors.Is(err, httperr.ErrBodyTimeout) {
			// Setting it worked above, so lifting it can only fail on a
			// connection already gone.
			_ = rc.SetReadDeadline(time.Time{})
		}
	}
}

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
