// Package httpapi is outprint's public HTTP API (SPEC §4–§5): synchronous
// renders (POST /v1/render), Outline documents (GET /render/{id} and
// /status/{id}, outline.go), durable jobs (/v1/jobs, jobs.go), forms,
// Office documents (POST /v1/convert and office jobs, convert.go), health
// and metrics. It speaks HTTP and nothing else: it reads requests,
// authenticates, and answers; every non-2xx answer is the error list of
// SPEC §5 (package httperr), and internal error text stays in the logs,
// tied to the request id.
//
// A synchronous render runs in the order of SPEC §4, kept in one place by
// worker.Ticket:
//
//	authenticate                    401 before the body is read
//	Capacity.Enter                  counts the user (429 user_limit)
//	read the body                   413 too_large before any parse
//	Ticket.Check                    Markdown size, Binding, math, within the check budget
//	Ticket.Render                   images fetched and validated (422), a slot
//	                                (FIFO queue, maxWait: 429 busy), the Render stage
//
// The Render stage is the local pipeline, or on a gateway the workers
// (cluster.Remote). A job touches this package when it is submitted
// (jobs.Prepare does the acceptance) and when it is shown; the work of a
// job is worker.Jobs'.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/worker"
)

// WebPages is the page for people: its files, and the progress page an
// Outline reader's browser gets while its document prints as a job.
// *web.Site implements it.
type WebPages interface {
	http.Handler
	Progress(w http.ResponseWriter, r *http.Request, jobID, title string)
	// ProgressStart sends the progress page before its job is accepted;
	// end finishes it with the job's id, or the reason there is none.
	ProgressStart(w http.ResponseWriter, r *http.Request, title string) (end func(jobID, message string) error, err error)
}

// Rasterizer draws a page of a PDF as a PNG (jobs.Rasterizer);
// *raster.Rasterizer implements it.
type Rasterizer = jobs.Rasterizer

// FormFiller reads, checks and fills PDF forms: *forms.Filler in `serve`,
// a gateway's *cluster.Remote, which sends the work to a worker.
type FormFiller interface {
	Fields(ctx context.Context, pdf []byte) ([]forms.Field, error)
	Check(ctx context.Context, pdf, values []byte) error
	Fill(ctx context.Context, pdf, values []byte, progress func(phase string)) (*forms.Result, error)
}

// Authenticator confirms an API key. It returns the key's user and tenant.
// *config.Config implements it.
type Authenticator interface {
	LookupKey(bearer string) (user, tenant string, ok bool)
}

// Observer is told about requests and jobs, for metrics (what admission
// and the renders did is worker.Observer's). *metrics.Metrics implements
// it. All methods must be cheap and safe for concurrent use.
type Observer interface {
	// ObserveRequest records the time to answer one request; route is
	// the registered pattern that served it, or "other" (a bounded set:
	// never the client's path).
	ObserveRequest(route string, status int, d time.Duration)
	// JobAccepted counts one new job (202).
	JobAccepted()
}

// DefaultBodyTimeout bounds how long a client may take to send its request
// body; a client that trickles bytes must not hold a connection forever.
const DefaultBodyTimeout = 2 * time.Minute

// Config wires a Server. Capacity is required.
type Config struct {
	// Capacity counts users, runs the cheap checks and renders under a
	// slot, in the order of SPEC §4 (package worker); its Render stage is
	// the local pipeline or, on a gateway, the workers.
	Capacity *worker.Capacity
	// Auth confirms API keys; nil accepts none. Anonymous, when true, lets
	// requests without an Authorization header in as user "local" of
	// tenant "local" (SPEC §5: only with no keys and no Outline
	// configured, and then only on loopback, which cmd enforces).
	Auth      Authenticator
	Anonymous bool
	// RemoteImages fetches absolute image URLs (from the allowed hosts);
	// nil refuses them.
	RemoteImages images.Source
	// Outline, when set, serves GET /render/{documentId} and GET
	// /status/{documentId} for Outline's readers (outline.go); nil answers
	// them 404.
	Outline *outline.Client
	// Jobs, when set, serves the job routes of SPEC §5 (POST and GET
	// /v1/jobs, GET and DELETE /v1/jobs/{id}, GET /v1/jobs/{id}/result;
	// jobs.go); nil answers them 404.
	Jobs *jobs.Service
	// Forms, when set, serves POST /v1/forms/fields and POST
	// /v1/forms/fill (forms.go) and takes form jobs (formjobs.go); nil
	// answers them 404.
	Forms FormFiller
	// Office converts Office documents (POST /v1/convert, office jobs):
	// an *office.Pool in serve, a gateway's *cluster.Remote. Nil answers
	// them 422 "Office conversion is not available on this server" (the
	// caller leaves it nil, never a nil *office.Pool).
	Office worker.Converter
	// Ready reports whether the service can render (TeX, data folder);
	// nil means always ready.
	Ready func(ctx context.Context) error
	// Metrics serves GET /metrics; nil answers 404.
	Metrics http.Handler
	// Console serves River's web console under ConsolePath to admin API
	// keys only (admin.go); without a Handler those paths are 404.
	Console Console
	// Observer is told about refusals, waits and renders; nil records
	// nothing.
	Observer Observer
	// Logger receives one line per request and every failure, with the
	// request id (default: discard).
	Logger *slog.Logger
	// BodyTimeout bounds reading the request body (default
	// DefaultBodyTimeout).
	BodyTimeout time.Duration
	// EventPoll is how often a job event stream reads its job (default
	// DefaultEventPoll); EventHeartbeat how often an idle stream sends a
	// comment so proxies keep it open (default DefaultEventHeartbeat);
	// MaxEventStreams how many streams one user may hold at once (default
	// DefaultMaxEventStreams). See events.go.
	EventPoll       time.Duration
	EventHeartbeat  time.Duration
	MaxEventStreams int
	// Raster draws the page thumbnails of job results (GET
	// /v1/jobs/{id}/pages/{n}.png); nil answers them 404.
	Raster Rasterizer
	// Web serves the page for people (GET / and /assets/, package web)
	// and the progress page of Outline readers' browsers; nil answers 404
	// there and gives browsers the synchronous answer.
	Web WebPages
	// Callbacks checks the callbackUrl of POST /v1/jobs and gives the
	// API keys' defaults (webhook.go); nil refuses callbacks.
	Callbacks Callbacks
	// PublicURL ("https://outprint.example.com", webhooks.publicUrl) makes
	// the links of webhook bodies absolute; "" uses the address of the
	// listener the submitting request came in on, never its Host header.
	PublicURL string
	// WriteTimeout bounds sending one answer, from its first byte
	// (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// TempDir holds the asset parts of multipart uploads while a request
	// runs (default os.TempDir()).
	TempDir string
}

// Server is the HTTP API. It is safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	obs     Observer
	ans     *httperr.Writer
	streams streamCounter
}

// New returns a server for cfg with its defaults filled in, or an error
// without a Capacity (a wiring bug, found at startup).
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ans := &httperr.Writer{Logger: cfg.Logger, Map: mapError, Observe: cfg.Observer.ObserveRequest, WriteTimeout: cfg.WriteTimeout}
	return &Server{cfg: cfg, log: cfg.Logger, obs: cfg.Observer, ans: ans, streams: streamCounter{max: cfg.MaxEventStreams}}, nil
}

// validate refuses a configuration the server cannot work with.
func (c Config) validate() error {
	if c.Capacity == nil {
		return errors.New("httpapi.New: Capacity is required")
	}
	return nil
}

// WithDefaults returns c with every unset field at its default: no logs,
// no metrics and the Default* bounds.
func (c Config) WithDefaults() Config {
	cfg := c
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.EventPoll <= 0 {
		cfg.EventPoll = DefaultEventPoll
	}
	if cfg.EventHeartbeat <= 0 {
		cfg.EventHeartbeat = DefaultEventHeartbeat
	}
	if cfg.MaxEventStreams <= 0 {
		cfg.MaxEventStreams = DefaultMaxEventStreams
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	return cfg
}

type nopObserver struct{}

func (nopObserver) ObserveRequest(string, int, time.Duration) {}
func (nopObserver) JobAccepted()                              {}

// Handler returns the routes of SPEC §5 wrapped in request ids, logging
// and panic recovery (httperr.Writer.Wrap). Unknown paths and wrong
// methods get the error list too, not Go's plain-text answers.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", s.ans.Method(http.MethodGet, s.healthz))
	mux.Handle("/readyz", s.ans.Method(http.MethodGet, s.readyz))
	if s.cfg.Metrics != nil {
		mux.Handle("/metrics", s.ans.Method(http.MethodGet, s.cfg.Metrics.ServeHTTP))
	}
	mux.Handle("/v1/render", s.ans.Method(http.MethodPost, s.renderAPI))
	mux.Handle("/v1/convert", s.ans.Method(http.MethodPost, s.convertAPI))
	mux.Handle("/render/{documentId}", s.ans.Method(http.MethodGet, s.outlineRender))
	mux.Handle("/render/collection/{collectionId}", s.ans.Method(http.MethodGet, s.outlineCollectionRender))
	mux.Handle("/status/{documentId}", s.ans.Method(http.MethodGet, s.outlineStatus))
	s.jobRoutes(mux)
	s.consoleRoutes(mux)
	s.formRoutes(mux)
	if s.cfg.Web != nil {
		mux.Handle("/{$}", s.ans.Method(http.MethodGet, s.cfg.Web.ServeHTTP))
		mux.Handle("/assets/", s.ans.Method(http.MethodGet, s.cfg.Web.ServeHTTP))
	}
	mux.HandleFunc("/", s.ans.NoEndpoint)
	if d, ok := s.cfg.Observer.(routeDeclarer); ok {
		d.DeclareRoutes("/healthz", "/readyz", "/v1/render", "/v1/convert", "/render/{documentId}",
			"/render/collection/{collectionId}", "/status/{documentId}")
	}
	return s.ans.Wrap(mux)
}

// routeDeclarer is an Observer that can show a route's series before its
// first request (*metrics.Metrics): the dashboard's latency panels and
// the render alerts read them.
type routeDeclarer interface {
	DeclareRoutes(routes ...string)
}

// healthz is liveness: it touches no lock that render work holds (not even
// admission's), so it answers in milliseconds whatever the renders are
// doing.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	// A prober that hung up has no use for the error.
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// readyTimeout bounds one readiness check; a probe that hangs is a "no".
const readyTimeout = 5 * time.Second

// readyz says whether the service can render: TeX and the data folder
// (Config.Ready), plus the figures of admission and of the preview pool
// for an operator's eye.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	// A process that is shutting down takes no new render: a worker
	// draining its last renders answers not ready, so gateways probing it
	// stop sending before a call is refused.
	adm := s.cfg.Capacity.Admission()
	if adm.Closed() {
		s.writeError(w, r, httperr.NotReady(admission.ErrClosed))
		return
	}
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			s.writeError(w, r, httperr.NotReady(err))
			return
		}
	}
	st, pv := adm.Stats(), s.cfg.Capacity.Previews().Stats()
	httperr.WriteJSON(w, http.StatusOK, map[string]any{"status": "ready", "admission": map[string]any{
		"slots": st.Slots, "queueDepth": st.QueueDepth, "running": st.Running, "queued": st.Queued,
	}, "previews": map[string]any{
		"slots": pv.Slots, "running": pv.Running, "queued": pv.Queued,
	}})
}

// bearerToken returns the token of an "Authorization: Bearer" header; the
// scheme is case-insensitive (RFC 7235).
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
