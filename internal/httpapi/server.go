// Package httpapi is outprint's HTTP surface (SPEC §4–§5): synchronous
// renders (POST /v1/render), Outline documents (GET /render/{id} and
// /status/{id}, outline.go), durable jobs (/v1/jobs, jobs.go), health and
// metrics. It is the only place where errors become
// status codes and client text: every non-2xx answer is the error list of
// SPEC §5, written by writeError, and internal error text stays in the logs,
// tied to the request id.
//
// A synchronous render runs in the order of SPEC §4:
//
//	authenticate, read the body     413 too_large before any parse
//	Pipeline.Check                  Markdown size, Binding, math; holds nothing
//	admission Enter                 counts the user (429 user_limit)
//	Pipeline.Fetch                  images fetched and validated (422)
//	admission Acquire               a slot, FIFO queue, maxWait (429 busy)
//	Renderer.Render                 the worker's part (TeX), under the slot
//
// The Renderer is an interface so that a remote worker can take the local
// pipeline's place without the gateway changing.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/render"
)

// Renderer runs the Render stage of a prepared document: the part that
// holds an admission slot. *render.Pipeline implements it; a remote worker
// can take its place later.
type Renderer interface {
	Render(ctx context.Context, pr *render.Prepared, progress func(render.Progress)) (*render.Result, error)
}

// WebPages is the page for people: its files, and the progress page an
// Outline reader's browser gets while its document prints as a job.
// *web.Site implements it.
type WebPages interface {
	http.Handler
	Progress(w http.ResponseWriter, r *http.Request, jobID, title string)
}

// Rasterizer draws a page of a PDF as a PNG (jobs.Rasterizer);
// *raster.Rasterizer implements it.
type Rasterizer = jobs.Rasterizer

// Authenticator confirms an API key. It returns the key's user and tenant.
// *config.Config implements it.
type Authenticator interface {
	LookupKey(bearer string) (user, tenant string, ok bool)
}

// Observer is told what admission and the renderer did, for metrics.
// *metrics.Metrics implements it. All methods must be cheap and safe for
// concurrent use.
type Observer interface {
	// Refused counts one 429, by code (busy, user_limit).
	Refused(code string)
	// ObserveQueueWait records how long one request waited for a slot,
	// whatever the outcome of the wait.
	ObserveQueueWait(d time.Duration)
	// ObserveRender records one render that held a slot; result is "ok"
	// or the error code it ended with.
	ObserveRender(d time.Duration, result string)
	// ObserveRenderMemory records the peak resident memory of one
	// render's TeX processes, in bytes.
	ObserveRenderMemory(bytes int64)
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

// Config wires a Server. Pipeline and Admission are required.
type Config struct {
	// Pipeline runs the gateway's stages: Check and Fetch.
	Pipeline *render.Pipeline
	// Renderer runs the Render stage under a slot (default Pipeline).
	Renderer Renderer
	// Admission decides who may render (SPEC §4).
	Admission *admission.Controller
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
	// /v1/forms/fill (forms.go); nil answers them 404.
	Forms *forms.Filler
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
	// the links of webhook bodies absolute; "" uses the scheme and Host of
	// the request that submitted the job.
	PublicURL string
	// CheckBudget bounds the cheap checks of one request (default
	// DefaultCheckBudget; guard.go).
	CheckBudget time.Duration
	// WriteTimeout bounds sending one answer, from its first byte
	// (default DefaultWriteTimeout).
	WriteTimeout time.Duration
	// TempDir holds the asset parts of multipart uploads while a request
	// runs (default os.TempDir()).
	TempDir string
	// WorkerRole makes the server a worker's listener (worker.go): only
	// the bundle route and health, readiness and metrics. ClusterSecret
	// is what gateways must present; without one nothing is rendered.
	WorkerRole    bool
	ClusterSecret string
}

// Server is the HTTP API. It is safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	obs      Observer
	renderer Renderer
	streams  streamCounter
	checks   chan struct{} // one token per cheap check running (guard.go)
}

// New returns a server for cfg with its defaults filled in, or an error
// without a Pipeline or an Admission controller (a wiring bug, found at
// startup).
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, log: cfg.Logger, obs: cfg.Observer, renderer: cfg.Renderer, checks: make(chan struct{}, checkSlots(runtime.GOMAXPROCS(0))),
		streams: streamCounter{max: cfg.MaxEventStreams}}, nil
}

// validate refuses a configuration the server cannot work with.
func (c Config) validate() error {
	if c.Pipeline == nil || c.Admission == nil {
		return errors.New("httpapi.New: Pipeline and Admission are required")
	}
	return nil
}

// WithDefaults returns c with every unset field at its default: no logs,
// no metrics, the Pipeline as the Render stage, and the Default* bounds.
func (c Config) WithDefaults() Config {
	cfg := c
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Renderer == nil && cfg.Pipeline != nil {
		cfg.Renderer = cfg.Pipeline
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
	if cfg.CheckBudget <= 0 {
		cfg.CheckBudget = DefaultCheckBudget
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	return cfg
}

type nopObserver struct{}

func (nopObserver) Refused(string)                            {}
func (nopObserver) ObserveQueueWait(time.Duration)            {}
func (nopObserver) ObserveRender(time.Duration, string)       {}
func (nopObserver) ObserveRenderMemory(int64)                 {}
func (nopObserver) ObserveRequest(string, int, time.Duration) {}
func (nopObserver) JobAccepted()                              {}

// Handler returns the routes of SPEC §5 wrapped in request ids, logging
// and panic recovery. Unknown paths and wrong methods get the error list
// too, not Go's plain-text answers.
func (s *Server) Handler() http.Handler {
	if s.cfg.WorkerRole {
		return s.workerHandler()
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", method(s, http.MethodGet, s.healthz))
	mux.Handle("/readyz", method(s, http.MethodGet, s.readyz))
	if s.cfg.Metrics != nil {
		mux.Handle("/metrics", method(s, http.MethodGet, s.cfg.Metrics.ServeHTTP))
	}
	mux.Handle("/v1/render", method(s, http.MethodPost, s.renderAPI))
	mux.Handle("/render/{documentId}", method(s, http.MethodGet, s.outlineRender))
	mux.Handle("/render/collection/{collectionId}", method(s, http.MethodGet, s.outlineCollectionRender))
	mux.Handle("/status/{documentId}", method(s, http.MethodGet, s.outlineStatus))
	s.jobRoutes(mux)
	s.consoleRoutes(mux)
	s.formRoutes(mux)
	if s.cfg.Web != nil {
		mux.Handle("/{$}", method(s, http.MethodGet, s.cfg.Web.ServeHTTP))
		mux.Handle("/assets/", method(s, http.MethodGet, s.cfg.Web.ServeHTTP))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errNotFound)
	})
	return s.middleware(mux)
}

// method answers 405 with the error list to any method but m (GET also
// accepts HEAD).
func method(s *Server, m string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
			h(w, r)
			return
		}
		if m == http.MethodGet {
			w.Header().Set("Allow", "GET, HEAD")
		} else {
			w.Header().Set("Allow", m)
		}
		s.writeError(w, r, errMethod)
	})
}

type ctxKey int

const requestIDKey ctxKey = 0

// requestID returns the id of the request, for logs.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// newRequestID returns 16 hex digits; unique enough to find one request in
// the logs, and never taken from the client, so a log line cannot be
// forged through it.
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// middleware gives every request an id (echoed in X-Request-Id), logs one
// line per request and turns a panic into a 500 error list. Admission
// tickets are released by the handlers' own defers, which run while the
// panic unwinds, before it reaches this recover.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := newRequestID()
		w.Header().Set("X-Request-Id", id)
		ctx := context.WithValue(r.Context(), requestIDKey, id)
		r = trackBody(r.WithContext(ctx))
		sw := &statusWriter{ResponseWriter: w, writeTimeout: s.cfg.WriteTimeout}
		start := time.Now()
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(ctx, "panic", "request_id", id, "panic", v)
				if !sw.wrote {
					s.writeError(sw, r, errInternal)
				}
			}
			took := time.Since(start)
			s.obs.ObserveRequest(routeLabel(r.Pattern), sw.status, took)
			// Probes and scrapes arrive every few seconds; logging them
			// would bury the renders.
			if p := r.URL.Path; p != "/healthz" && p != "/readyz" && p != "/metrics" {
				s.log.InfoContext(ctx, "request", "request_id", id, "method", r.Method, "path", r.URL.Path,
					"status", sw.status, "bytes", sw.bytes, "duration_ms", took.Milliseconds())
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// routeLabel is the metrics label of a request: the route pattern the
// mux matched (set on the request by ServeMux), so that the label's values
// are the registered routes and a client cannot add one. Paths no route
// matched share one value.
func routeLabel(pattern string) string {
	if pattern == "" || pattern == "/" {
		return "other"
	}
	return pattern
}

// statusWriter remembers the status and size of an answer for the request
// log line. It forwards Unwrap so http.ResponseController reaches the
// connection (read deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
	// writeTimeout bounds the answer from its first byte on: a client that
	// stops reading must not hold the connection (and a PDF in memory).
	// It starts here, not in http.Server.WriteTimeout, which would count
	// the render too.
	writeTimeout time.Duration
	// ownDeadline is set once the handler set a write deadline itself
	// (an event stream clears it): writeTimeout then does not apply.
	ownDeadline bool
}

// SetWriteDeadline is what http.ResponseController calls on a handler's
// behalf; the handler's own deadline wins over writeTimeout.
func (w *statusWriter) SetWriteDeadline(t time.Time) error {
	w.ownDeadline = true
	return http.NewResponseController(w.ResponseWriter).SetWriteDeadline(t)
}

func (w *statusWriter) start(code int) {
	w.status, w.wrote = code, true
	if w.writeTimeout > 0 && !w.ownDeadline {
		http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.writeTimeout))
	}
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.start(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.start(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// healthz is liveness: it touches no lock that render work holds (not even
// admission's), so it answers in milliseconds whatever the renders are
// doing.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// readyTimeout bounds one readiness check; a probe that hangs is a "no".
const readyTimeout = 5 * time.Second

// readyz says whether the service can render: TeX and the data folder
// (Config.Ready), plus the admission figures for an operator's eye.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	// A process that is shutting down takes no new render: a worker
	// draining its last renders answers not ready, so gateways probing it
	// stop sending before a call is refused.
	if s.cfg.Admission.Closed() {
		s.writeError(w, r, notReady(admission.ErrClosed))
		return
	}
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			s.writeError(w, r, notReady(err))
			return
		}
	}
	st := s.cfg.Admission.Stats()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "admission": map[string]any{
		"slots": st.Slots, "queueDepth": st.QueueDepth, "running": st.Running, "queued": st.Queued,
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
