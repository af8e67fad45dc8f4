package httpapi

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
)

// The worker's listener (`outprint worker`): gateways send it a bundle —
// the document with the images they fetched and validated — and get the
// PDF back. It serves only WorkerRenderPath, /healthz, /readyz and
// /metrics. Every render request must carry the cluster secret; the
// worker re-checks every limit it enforces (Check and Fetch again on the
// bundle, its own render limits), and renders only under a slot of its
// one capacity, which it shares with its River job workers. A worker with
// no free slot answers busy at once — 429 with Retry-After and the body
// {"message","phase"} of SPEC §4 — so the gateway moves on to another; a
// draining worker answers 503 shutting_down in the same shape.

// WorkerRenderPath is the route gateways post bundles to.
const WorkerRenderPath = "/v1/worker/render"

// ClusterHeader carries the cluster secret from gateway to worker.
const ClusterHeader = "Outprint-Cluster-Secret"

// Headers of a worker's PDF answer, read by RemoteRenderer.
const (
	headerPages    = "X-Outprint-Pages"
	headerTitle    = "X-Outprint-Title"
	headerWarnings = "X-Outprint-Warnings"
	headerCPU      = "X-Outprint-Cpu-Ms"
	headerMaxRSS   = "X-Outprint-Max-Rss"
)

// Worker phases in busy answers: where the request was refused.
const (
	workerPhaseAdmission = "admission"
	workerPhaseDraining  = "draining"
)

// maxBundleBytes bounds a bundle before it is decoded: the largest
// Markdown a request may carry — a collection printed whole, up to
// limits.MaxCollectionBytes, not one document's limits.MaxMarkdownBytes —
// and the images of SPEC §3, both base64 in the JSON (a third more), with
// a margin for the JSON, the metadata and the images' names. The
// pipeline's own checks, by the request's Parts, run on what arrives.
const maxBundleBytes = (limits.MaxCollectionBytes+limits.MaxTotalImageBytes)*4/3 + 4<<20

// errClusterSecret answers 401 to a request without the right secret.
var errClusterSecret = &authError{"this is an outprint worker: requests must carry the cluster secret"}

// workerBusy is a worker's own refusal, written as {"message","phase"}.
type workerBusy struct {
	status     int
	message    string
	phase      string
	retryAfter int
}

func (e *workerBusy) Error() string { return fmt.Sprintf("worker %s: %s", e.phase, e.message) }

// clusterAuth compares the presented secret with the configured one in
// constant time. An empty configured secret admits nobody.
func (s *Server) clusterAuth(r *http.Request) bool {
	want := s.cfg.ClusterSecret
	got := r.Header.Get(ClusterHeader)
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// workerHandler is the worker's route table.
func (s *Server) workerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", method(s, http.MethodGet, s.healthz))
	mux.Handle("/readyz", method(s, http.MethodGet, s.readyz))
	if s.cfg.Metrics != nil {
		mux.Handle("/metrics", method(s, http.MethodGet, s.cfg.Metrics.ServeHTTP))
	}
	mux.Handle(WorkerRenderPath, method(s, http.MethodPost, s.workerRender))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errNotFound)
	})
	return s.middleware(mux)
}

func (s *Server) workerRender(w http.ResponseWriter, r *http.Request) {
	if !s.clusterAuth(r) {
		s.writeError(w, r, errClusterSecret)
		return
	}
	var b render.Bundle
	r.Body = http.MaxBytesReader(w, r.Body, maxBundleBytes)
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.writeError(w, r, errRequestTooBig)
			return
		}
		s.writeError(w, r, badRequest("", "the body must be a render bundle (JSON)"))
		return
	}
	checked, err := s.cfg.Pipeline.Check(b.Request())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Gateways count their users; the worker counts only its slots, so
	// every request is a user of its own.
	ticket, err := s.cfg.Admission.Enter("\x00gateway-" + requestID(r.Context()))
	if err != nil {
		s.writeWorkerRefusal(w, r, err)
		return
	}
	var took time.Duration
	defer func() { ticket.Done(took) }()
	prepared, err := s.cfg.Pipeline.Fetch(r.Context(), checked)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := ticket.Acquire(r.Context()); err != nil {
		s.writeWorkerRefusal(w, r, err)
		return
	}
	start := time.Now()
	res, err := s.renderer.Render(r.Context(), prepared, nil)
	d := time.Since(start)
	s.obs.ObserveRender(d, renderResult(r.Context(), err))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	took = d
	s.obs.ObserveRenderMemory(res.MaxRSS)
	h := w.Header()
	h.Set(headerTitle, url.QueryEscape(res.Title))
	h.Set(headerCPU, strconv.FormatInt(res.CPU.Milliseconds(), 10))
	h.Set(headerMaxRSS, strconv.FormatInt(res.MaxRSS, 10))
	if len(res.Warnings) > 0 {
		if j, err := json.Marshal(res.Warnings); err == nil {
			h.Set(headerWarnings, base64.RawURLEncoding.EncodeToString(j))
		}
	}
	writePDF(w, res)
}

// writeWorkerRefusal answers a refused request in the worker's own shape.
func (s *Server) writeWorkerRefusal(w http.ResponseWriter, r *http.Request, err error) {
	var ref *admission.Refusal
	busy := &workerBusy{status: http.StatusServiceUnavailable, message: "the worker is shutting down", phase: workerPhaseDraining, retryAfter: 1}
	switch {
	case errors.As(err, &ref):
		busy = &workerBusy{status: http.StatusTooManyRequests, message: admission.BusyMessage, phase: workerPhaseAdmission,
			retryAfter: ref.RetryAfterSeconds()}
	case errors.Is(err, admission.ErrClosed):
	default:
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "worker refused", "request_id", requestID(r.Context()), "status", busy.status, "phase", busy.phase)
	w.Header().Set("Retry-After", strconv.Itoa(busy.retryAfter))
	writeJSON(w, busy.status, map[string]string{"message": busy.message, "phase": busy.phase})
}

// workerProblems parses a worker's error list back into problems, so that
// a gateway answers its client exactly as the worker did.
func workerProblems(body []byte) ([]limits.Problem, bool) {
	var v struct {
		Errors []struct {
			Field   string        `json:"field"`
			Source  limits.Source `json:"source"`
			Code    string        `json:"code"`
			Message string        `json:"message"`
			Line    *int          `json:"line"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &v); err != nil || len(v.Errors) == 0 {
		return nil, false
	}
	out := make([]limits.Problem, len(v.Errors))
	for i, e := range v.Errors {
		out[i] = limits.Problem{Field: e.Field, Source: e.Source, Code: e.Code, Message: strings.TrimSpace(e.Message)}
		if e.Line != nil {
			out[i].Line = *e.Line
		}
	}
	return out, true
}
