package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/worker"
)

// The job routes (SPEC §5 "Jobs"): a render that does not hold a
// connection open. A job touches this package twice: at submit, where the
// body is read and acceptance (jobs.Prepare: the cheap checks and the
// images, under the caller's ticket) runs before jobs.Service.Submit
// stores it, and when it is shown (jobs.View). Its work is worker.Jobs'.
//
// Callers are identified as on /v1/render (API key, or "local" in
// anonymous mode) or, with Outline configured and no Authorization
// header, by Outline's accessToken cookie (user = Outline's user id,
// tenant = the team). Jobs belong to the user who submitted them within
// their tenant (Outline jobs: to the team, see mayRead): another user's or
// another tenant's job is 404, never 403, so ids cannot be probed.
// Idempotency keys stay scoped to the tenant; a key first used by a
// colleague answers 409 idempotency_mismatch.
//
// Every answer of these routes carries no-store (a job's state changes
// and belongs to one caller) and nosniff (outprint may be mounted on
// Outline's origin).

// Codes of the job routes' own answers.
const (
	CodeIdempotencyMismatch = "idempotency_mismatch" // 409: the key was used for another request
	CodeResultNotReady      = "result_not_ready"     // 409: the job has not succeeded (yet)
	CodeExpired             = "expired"              // 410: the result was deleted after jobs.ttl
	CodeQuota               = "quota"                // 429 or 507: the tenant reached a job quota
)

// quotaRetry is the Retry-After of a 429 quota: queued jobs finish at the
// pace of renders, so a few render durations free a place.
const quotaRetry = 30

// jobsPath is the collection of jobs; a job is jobsPath/{id}.
const jobsPath = jobs.Path

// jobRoutes registers the job routes on mux when a job service is
// configured.
func (s *Server) jobRoutes(mux *http.ServeMux) {
	if s.cfg.Jobs == nil {
		return
	}
	mux.Handle(jobsPath, methods(s, map[string]http.HandlerFunc{
		http.MethodPost: s.submitJob,
		http.MethodGet:  s.listJobs,
	}))
	mux.Handle(jobsPath+"/{id}", methods(s, map[string]http.HandlerFunc{
		http.MethodGet:    s.getJob,
		http.MethodDelete: s.cancelJob,
	}))
	mux.Handle(jobsPath+"/{id}/result", methods(s, map[string]http.HandlerFunc{
		http.MethodGet: s.jobResult,
	}))
	mux.Handle(jobsPath+"/{id}/events", methods(s, map[string]http.HandlerFunc{
		http.MethodGet: s.jobEvents,
	}))
	mux.Handle(jobsPath+"/{id}/pages/{page}", methods(s, map[string]http.HandlerFunc{
		http.MethodGet: s.jobPage,
	}))
}

// methods is s.ans.Methods for the job routes, whose every answer
// carries no-store (a job's state changes and belongs to one caller) and
// nosniff (outprint may be mounted on Outline's origin).
func methods(s *Server, hs map[string]http.HandlerFunc) http.Handler {
	h := s.ans.Methods(hs)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// caller is who asks, and whether Outline's cookie said so (as opposed to
// an API key or anonymous mode).
type caller struct {
	identity
	byCookie bool
}

// mayRead says whether the caller may see job and fetch its result: jobs
// belong to the user who submitted them, within their tenant (issue 10: a
// colleague in the same tenant could read and cancel them). Outline jobs
// are the exception: Outline decides who may read a document, and every
// download of one asks Outline about the reader of that request, so the
// readers of a team share them. Anything else is ErrNotFound, as another
// tenant's job is, so ids cannot be probed.
func (c caller) mayRead(job jobs.Job) error {
	if job.User != c.user && job.Source != jobs.SourceOutline {
		return jobs.ErrNotFound
	}
	return nil
}

// mayCancel says whether the caller may cancel job: only its submitter.
func (c caller) mayCancel(job jobs.Job) error {
	if job.User != c.user {
		return jobs.ErrNotFound
	}
	return nil
}

// jobCaller identifies the caller of a job route: an Authorization header
// is an API key (checked as on /v1/render, even when a cookie came along);
// without one, Outline's accessToken cookie when Outline is configured;
// otherwise anonymous mode or 401.
func (s *Server) jobCaller(r *http.Request) (caller, error) {
	if r.Header.Get("Authorization") == "" && s.cfg.Outline != nil {
		if token := outline.TokenFromRequest(r); token != "" {
			u, err := s.cfg.Outline.AuthInfo(r.Context(), token)
			if err != nil {
				return caller{}, err
			}
			return caller{identity: identity{user: u.ID, tenant: u.TeamID}, byCookie: true}, nil
		}
	}
	id, err := s.authenticate(r)
	return caller{identity: id}, err
}

// submitJob is POST /v1/jobs: cheap checks, images fetched and validated,
// input stored and the job committed, then 202 with the job's address. A
// repeated Idempotency-Key with the same request answers 200 with the
// original job.
//
// Acceptance runs under admission (issue 10): the caller is counted
// against the per-user bound before the body is read and until the job is
// stored, and the tenant's quotas are checked before the body is read.
func (s *Server) submitJob(w http.ResponseWriter, r *http.Request) {
	c, a, err := s.admitCaller(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer a.Done()
	if err := s.cfg.Jobs.CheckQuota(r.Context(), c.tenant, max(r.ContentLength, 0)); err != nil {
		s.writeError(w, r, err)
		return
	}
	in, err := s.readJob(w, r, c, a)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	in.Tenant, in.User = c.tenant, c.user
	in.IdempotencyKey = r.Header.Get("Idempotency-Key")
	job, created, err := s.cfg.Jobs.Submit(r.Context(), in)
	if err == nil && !created && c.mayRead(job) != nil {
		// The tenant's key was first used by another user, whose job
		// this caller may not see.
		err = jobs.ErrIdempotencyMismatch
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
		s.obs.JobAccepted()
		s.log.InfoContext(r.Context(), "job accepted", "request_id", httperr.RequestID(r.Context()), "job", job.ID,
			"user", c.user, "tenant", c.tenant, "source", job.Source, "images", len(in.Assets))
	}
	w.Header().Set("Location", jobs.Link(job.ID))
	httperr.WriteJSON(w, status, jobs.NewView(job))
}

// jobBody is the JSON body of POST /v1/jobs: that of /v1/render, or an
// Outline document.
type jobBody struct {
	Markdown *string         `json:"markdown"`
	Metadata json.RawMessage `json:"metadata"`
	Source   *struct {
		Outline *struct {
			DocumentID   string `json:"documentId"`
			CollectionID string `json:"collectionId"`
		} `json:"outline"`
	} `json:"source"`
	// CallbackURL receives the job's status document when it ends
	// (webhook.go).
	CallbackURL *string `json:"callbackUrl"`
}

// readJob reads the body of POST /v1/jobs and runs everything acceptance
// asks of it: the cheap checks and the image fetch. It returns the input
// to store, without tenant, user and key.
func (s *Server) readJob(w http.ResponseWriter, r *http.Request, c caller, a *worker.Ticket) (jobs.Input, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return jobs.Input{}, errUnsupported
	}
	if mt != "application/json" {
		if c.byCookie {
			// A browser sends a cookie with a cross-site form post,
			// but never with a cross-site JSON post it was not allowed
			// (CORS preflight): cookie callers are held to JSON.
			return jobs.Input{}, errCookieJSON
		}
		first := s.firstPart(w, r)
		if isOfficeUpload(first) {
			return s.officeJob(w, r, c, a)
		}
		if s.isFormUpload(first) {
			// A form and its values; a callback comes from the key's
			// default only (the form part reader knows no callbackUrl).
			in, err := s.formJob(w, r, a)
			if err != nil {
				return in, err
			}
			cb, err := s.jobCallback(r, c, nil)
			if err != nil {
				return jobs.Input{}, err
			}
			in.Callback = cb
			return in, nil
		}
		var callback *string
		sp := s.newSpool()
		defer sp.remove()
		req, err := s.readRenderRequest(w, r, sp, &callback)
		if err != nil {
			return jobs.Input{}, err
		}
		cb, err := s.jobCallback(r, c, callback)
		if err != nil {
			return jobs.Input{}, err
		}
		in, err := s.prepareJob(r.Context(), a, req, sp.digest(req))
		in.Callback = cb
		return in, err
	}
	body, err := s.readJobJSON(w, r)
	if err != nil {
		return jobs.Input{}, err
	}
	cb, err := s.jobCallback(r, c, body.CallbackURL)
	if err != nil {
		return jobs.Input{}, err
	}
	in, err := s.readJobBody(r, a, body)
	in.Callback = cb
	return in, err
}

// readJobBody prepares the input of a JSON job body.
func (s *Server) readJobBody(r *http.Request, a *worker.Ticket, body jobBody) (jobs.Input, error) {
	if body.Source != nil {
		if body.Markdown != nil || len(body.Metadata) > 0 {
			return jobs.Input{}, httperr.BadRequest("source", "send either markdown (with metadata) or source, not both")
		}
		if body.Source.Outline == nil {
			return jobs.Input{}, httperr.BadRequest("source", `source must be {"outline":{"documentId":"…"}}`)
		}
		if id := body.Source.Outline.CollectionID; id != "" {
			if body.Source.Outline.DocumentID != "" {
				return jobs.Input{}, httperr.BadRequest("source", "send either documentId or collectionId, not both")
			}
			return s.outlineCollectionJob(r, a, id)
		}
		return s.outlineJob(r, a, body.Source.Outline.DocumentID)
	}
	if body.Markdown == nil {
		return jobs.Input{}, httperr.BadRequest("markdown", "markdown (or source) is required")
	}
	if len(*body.Markdown) > limits.MaxMarkdownBytes {
		return jobs.Input{}, limits.TooLarge(int64(len(*body.Markdown)))
	}
	meta := []byte(body.Metadata)
	if t := strings.TrimSpace(string(meta)); t == "" || t == "null" {
		meta = nil
	}
	req := render.Request{Name: "document.md", Markdown: []byte(*body.Markdown), Metadata: meta, Images: images.Assets{}}
	return s.prepareJob(r.Context(), a, req, jobs.UploadDigest(req.Name, req.Markdown, req.Metadata, nil))
}

// errCookieJSON refuses a multipart job from a caller identified by the
// Outline cookie.
var errCookieJSON = httperr.New(http.StatusUnsupportedMediaType, limits.Problem{Source: limits.SourceRequest, Code: limits.CodeInvalid,
	Message: `a request identified by the Outline cookie must send application/json, e.g. {"source":{"outline":{"documentId":"…"}}}`})

// readJobJSON reads the JSON body within the bounds of readRenderRequest:
// its size and BodyTimeout.
func (s *Server) readJobJSON(w http.ResponseWriter, r *http.Request) (body jobBody, err error) {
	if r.ContentLength > maxJSONBytes {
		return jobBody{}, limits.TooLarge(r.ContentLength)
	}
	lift := s.bodyDeadline(w)
	defer func() { lift(err) }()
	r.Body = http.MaxBytesReader(w, r.Body, maxJSONBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err = dec.Decode(&body)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return jobBody{}, limits.TooLarge(mbe.Limit)
		case isTimeout(err):
			return jobBody{}, httperr.ErrBodyTimeout
		case httperr.ClientGone(r.Context()):
			return jobBody{}, r.Context().Err()
		}
		return jobBody{}, httperr.BadRequest("", `the body is not a JSON object {"markdown": string, "metadata": object} or {"source": {"outline": {"documentId": string}}}: `+err.Error())
	}
	return body, nil
}

// outlineJob reads an Outline document as the reader whose cookie came
// with the request (SPEC §4's cheap checks, as GET /render does) and
// prepares it; its images are fetched with that cookie now, because the
// cookie is not kept for the worker.
func (s *Server) outlineJob(r *http.Request, a *worker.Ticket, id string) (jobs.Input, error) {
	doc, err := s.outlineDocument(r, id)
	if err != nil {
		return jobs.Input{}, err
	}
	return s.outlineInput(r, a, doc)
}

// outlineDocument asks Outline for document id as the reader of the
// request's cookie, and refuses it when the reader may not download it or
// it is too large.
func (s *Server) outlineDocument(r *http.Request, id string) (*outline.Document, error) {
	c := s.cfg.Outline
	if c == nil {
		return nil, errOutlineOff
	}
	if !outline.ValidDocumentID(id) {
		return nil, errDocumentID
	}
	token := outline.TokenFromRequest(r)
	if token == "" {
		return nil, errNoCookie
	}
	doc, err := c.Document(r.Context(), token, id)
	if err != nil {
		return nil, err
	}
	if !doc.CanDownload {
		return nil, outline.ErrNoDownload
	}
	if len(doc.Text) > limits.MaxMarkdownBytes {
		return nil, limits.TooLarge(int64(len(doc.Text)))
	}
	return doc, nil
}

// outlineInput accepts doc as a job's input: the cheap checks, and its
// images fetched from Outline (jobs.Prepare).
func (s *Server) outlineInput(r *http.Request, a *worker.Ticket, doc *outline.Document) (jobs.Input, error) {
	c := s.cfg.Outline
	token := outline.TokenFromRequest(r)
	title := doc.Title
	if title == "" {
		title = "Untitled"
	}
	src := &jobs.OutlineSource{
		DocumentID: doc.ID,
		URL:        c.BaseURL().String(),
		Title:      doc.Title,
		Author:     doc.CreatedBy.Name,
		UpdatedAt:  doc.UpdatedAt,
		// Outline names languages like "en" or, from older versions,
		// "en_US"; BCP 47 wants a hyphen.
		Language: strings.ReplaceAll(doc.Language, "_", "-"),
	}
	req := render.Request{Name: title + ".md", Markdown: []byte(doc.Text), Outline: src.Doc(), Images: c.Images(token)}
	// The digest of an Outline job is its document (jobs.RequestDigest):
	// the same key for the same document is the same request.
	in, err := s.prepareJob(r.Context(), a, req, "")
	in.Outline = src
	return in, err
}

// prepareJob runs acceptance (jobs.Prepare) under the caller's ticket:
// the cheap checks within the check budget, the images fetched and
// validated — uploaded ones, and for documents not from Outline external
// ones from the allowed hosts.
func (s *Server) prepareJob(ctx context.Context, t *worker.Ticket, req render.Request, digest string) (jobs.Input, error) {
	if req.Outline == nil {
		req.Images = images.Chain(req.Images, s.cfg.RemoteImages)
	}
	return jobs.Prepare(ctx, req, t.Prepare, digest)
}

// getJob is GET /v1/jobs/{id}.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	c, err := s.jobCaller(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, err := s.cfg.Jobs.Get(r.Context(), c.tenant, r.PathValue("id"))
	if err == nil {
		err = c.mayRead(job)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !job.Terminal() {
		// Progress is written about once a second; polling faster finds
		// nothing new.
		w.Header().Set("Retry-After", "1")
	}
	httperr.WriteJSON(w, http.StatusOK, jobs.NewView(job))
}

// listJobs is GET /v1/jobs: the caller's most recent jobs, newest first,
// ?limit=N of them (default jobs.DefaultListLimit, at most
// jobs.MaxListLimit).
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	c, err := s.jobCaller(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > jobs.MaxListLimit {
			s.writeError(w, r, httperr.BadRequest("limit", fmt.Sprintf("limit must be an integer from 1 to %d", jobs.MaxListLimit)))
			return
		}
		limit = n
	}
	list, err := s.cfg.Jobs.List(r.Context(), c.tenant, c.user, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views := make([]jobs.View, 0, len(list))
	for _, j := range list {
		views = append(views, jobs.NewView(j))
	}
	httperr.WriteJSON(w, http.StatusOK, map[string]any{"jobs": views})
}

// cancelJob is DELETE /v1/jobs/{id}: a queued job ends at once, a running
// render is stopped (its TeX process group killed). A job that has ended
// already is answered as it is.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	c, err := s.jobCaller(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	job, err := s.cfg.Jobs.Get(r.Context(), c.tenant, r.PathValue("id"))
	if err == nil {
		err = c.mayCancel(job)
	}
	if err == nil {
		job, err = s.cfg.Jobs.Cancel(r.Context(), c.tenant, job.ID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "job cancel", "request_id", httperr.RequestID(r.Context()), "job", job.ID, "state", job.State)
	httperr.WriteJSON(w, http.StatusOK, jobs.NewView(job))
}

// jobResult is GET /v1/jobs/{id}/result: the PDF of a succeeded job. For
// an Outline job the reader whose cookie came with this request must still
// be allowed to download the document: the right is asked of Outline
// again, not taken from acceptance.
func (s *Server) jobResult(w http.ResponseWriter, r *http.Request) {
	c, err := s.jobCaller(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rc, job, err := s.cfg.Jobs.Result(r.Context(), c.tenant, r.PathValue("id"))
	if job.ID != "" && c.mayRead(job) != nil {
		// Whether it is ready or expired is not for another user to learn.
		if rc != nil {
			_ = rc.Close() // read only, and never read
		}
		err = jobs.ErrNotFound
	}
	if err != nil {
		if errors.Is(err, jobs.ErrNotReady) {
			err = &notReadyJobError{state: job.State, err: err}
		}
		s.writeError(w, r, err)
		return
	}
	defer func() { _ = rc.Close() }() // read only: its Close has nothing to report
	if job.Source == jobs.SourceOutline {
		if err := s.checkDownload(r, job.OutlineDocumentID); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	s.writeResult(w, r, rc, job)
}

// writeResult sends the result PDF of job, read from rc.
func (s *Server) writeResult(w http.ResponseWriter, r *http.Request, rc io.Reader, job jobs.Job) {
	h := w.Header()
	h.Set("Content-Type", "application/pdf")
	h.Set("Content-Disposition", contentDisposition(jobs.Title(job)))
	if job.Pages > 0 {
		h.Set("X-Outprint-Pages", strconv.Itoa(job.Pages))
	}
	if f, ok := rc.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := f.Stat(); err == nil {
			h.Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
		}
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.Copy(w, rc); err != nil {
		s.log.InfoContext(r.Context(), "job result: copy", "request_id", httperr.RequestID(r.Context()), "job", job.ID, "err", err)
	}
}

// checkDownload asks Outline, with the cookie of this request, whether its
// reader may still download document id.
func (s *Server) checkDownload(r *http.Request, id string) error {
	c := s.cfg.Outline
	if c == nil {
		return errOutlineOff
	}
	token := outline.TokenFromRequest(r)
	if token == "" {
		return errNoCookie
	}
	if col, ok := strings.CutPrefix(id, collectionPrefix); ok {
		// A collection: the reader must still be able to read it. Each
		// document's download right was asked at acceptance.
		_, err := c.Collection(r.Context(), token, col)
		return err
	}
	doc, err := c.Document(r.Context(), token, id)
	if err != nil {
		return err
	}
	if !doc.CanDownload {
		return outline.ErrNoDownload
	}
	return nil
}

// notReadyJobError is jobs.ErrNotReady with the state the job is in, which
// decides what the client is told.
type notReadyJobError struct {
	state string
	err   error
}

func (e *notReadyJobError) Error() string { return fmt.Sprintf("%v (job %s)", e.err, e.state) }
func (e *notReadyJobError) Unwrap() error { return e.err }

// jobsAnswer maps the errors of package jobs to their answers; ok is false
// for any other error.
func jobsAnswer(err error) (httperr.Answer, bool) {
	one := func(status int, p limits.Problem, retry int) (httperr.Answer, bool) {
		a := httperr.One(status, p)
		a.RetryAfter = retry
		return a, true
	}
	var (
		nr *notReadyJobError
		qe *jobs.QuotaError
	)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return one(http.StatusNotFound, limits.Problem{Field: "id", Source: limits.SourceRequest, Code: httperr.CodeNotFound,
			Message: "no such job"}, 0)
	case errors.Is(err, jobs.ErrIdempotencyMismatch):
		return one(http.StatusConflict, limits.Problem{Field: "Idempotency-Key", Source: limits.SourceRequest, Code: CodeIdempotencyMismatch,
			Message: "this Idempotency-Key was used for a different request; use a new key for a new request"}, 0)
	case errors.As(err, &nr) && (nr.state == jobs.StateFailed || nr.state == jobs.StateCancelled):
		return one(http.StatusConflict, limits.Problem{Source: limits.SourceRequest, Code: CodeResultNotReady,
			Message: "the job " + nr.state + " and has no result; GET the job for its error"}, 0)
	case errors.Is(err, jobs.ErrNotReady):
		return one(http.StatusConflict, limits.Problem{Source: limits.SourceService, Code: CodeResultNotReady,
			Message: "the job has not finished yet; poll GET /v1/jobs/{id} until its state is succeeded"}, 1)
	case errors.As(err, &qe) && qe.Queued:
		return one(http.StatusTooManyRequests, limits.Problem{Source: limits.SourceService, Code: CodeQuota,
			Message: fmt.Sprintf("your tenant has %d jobs queued or running, at most %d (jobs.maxQueuedPerTenant); retry when some have finished", qe.Used, qe.Limit)}, quotaRetry)
	case errors.As(err, &qe):
		return one(http.StatusInsufficientStorage, limits.Problem{Source: limits.SourceService, Code: CodeQuota,
			Message: fmt.Sprintf("your tenant keeps %d bytes of job inputs and results, at most %d (jobs.maxStoredBytesPerTenant); they are deleted jobs.ttl after each job", qe.Used, qe.Limit)}, 0)
	case errors.Is(err, jobs.ErrExpired):
		return one(http.StatusGone, limits.Problem{Source: limits.SourceRequest, Code: CodeExpired,
			Message: "the result was deleted when the job's retention (jobs.ttl) ran out; submit the document again"}, 0)
	}
	return httperr.Answer{}, false
}
