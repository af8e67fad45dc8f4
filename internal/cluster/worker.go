package cluster

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/worker"
)

// WorkerConfig configures a worker's listener. Capacity and Secret are
// required.
type WorkerConfig struct {
	// Capacity is the worker's one capacity (worker.capacity slots, no
	// queue), shared with its job workers.
	Capacity *worker.Capacity
	// Secret is what gateways must present (cluster.secret).
	Secret string
	// Forms reads and fills the forms gateways send (FormFieldsPath,
	// FormCheckPath, FormFillPath); nil answers those routes 404.
	Forms *forms.Filler
	// Office converts the Office documents gateways send (ConvertPath,
	// office.go); nil (no LibreOffice here) answers them 422 "Office
	// conversion is not installed on this server". The caller leaves it
	// nil, never a nil *office.Pool.
	Office worker.Converter
	// Ready reports whether the worker can render (TeX, data folder, job
	// database); nil means always ready.
	Ready func(ctx context.Context) error
	// Metrics serves GET /metrics; nil answers 404.
	Metrics http.Handler
	// ObserveRequest, when set, records the time to answer each request.
	ObserveRequest func(route string, status int, d time.Duration)
	// Logger receives one line per request and every failure (default:
	// discard).
	Logger *slog.Logger
}

// validate refuses a listener that could not serve (a wiring bug, or a
// worker without its secret: it would render for nobody).
func (c WorkerConfig) validate() error {
	switch {
	case c.Capacity == nil:
		return errors.New("cluster: a worker needs its Capacity")
	case c.Secret == "":
		return errors.New("cluster.secret: a worker needs the cluster secret (OUTPRINT_CLUSTER_SECRET)")
	}
	return nil
}

// Worker is a worker's listener (`outprint worker`): RenderPath, the form
// routes (forms.go), ConvertPath (office.go), /healthz, /readyz and /metrics, nothing else. It is safe for concurrent use.
type Worker struct {
	cfg WorkerConfig
	ans *httperr.Writer
	log *slog.Logger
}

// NewWorker returns the listener cfg describes.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ans := &httperr.Writer{Logger: cfg.Logger, Observe: cfg.ObserveRequest}
	return &Worker{cfg: cfg, ans: ans, log: cfg.Logger}, nil
}

// errSecret answers 401 to a request without the right secret.
var errSecret = httperr.Unauthorized("this is an outprint worker: requests must carry the cluster secret")

// errBundle answers a body that is not a bundle.
var errBundle = httperr.BadRequest("", "the body must be a render bundle (JSON)")

// errBundleTooBig answers a bundle over maxBundleBytes.
var errBundleTooBig = httperr.New(http.StatusRequestEntityTooLarge, limits.Problem{Source: limits.SourceRequest, Code: limits.CodeTooLarge,
	Message: fmt.Sprintf("the bundle is larger than %d bytes", maxBundleBytes)})

// Handler is the worker's route table, wrapped in request ids, logs and
// panic recovery.
func (wk *Worker) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/healthz", wk.ans.Method(http.MethodGet, healthz))
	mux.Handle("/readyz", wk.ans.Method(http.MethodGet, wk.readyz))
	if wk.cfg.Metrics != nil {
		mux.Handle("/metrics", wk.ans.Method(http.MethodGet, wk.cfg.Metrics.ServeHTTP))
	}
	mux.Handle(RenderPath, wk.ans.Method(http.MethodPost, wk.render))
	mux.Handle(ConvertPath, wk.ans.Method(http.MethodPost, wk.convert))
	if wk.cfg.Forms != nil {
		mux.Handle(FormFieldsPath, wk.ans.Method(http.MethodPost, wk.formFields))
		mux.Handle(FormCheckPath, wk.ans.Method(http.MethodPost, wk.formCheck))
		mux.Handle(FormFillPath, wk.ans.Method(http.MethodPost, wk.formFill))
	}
	mux.HandleFunc("/", wk.ans.NoEndpoint)
	return wk.ans.Wrap(mux)
}

// healthz is liveness: it touches nothing a render holds.
func healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	httperr.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyTimeout bounds one readiness check; a check that hangs is a "no".
const readyTimeout = 5 * time.Second

// readyz says whether the worker takes renders: not while it drains (so
// gateways probing it stop sending before a call is refused), not while
// its checks fail.
func (wk *Worker) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	adm := wk.cfg.Capacity.Admission()
	if adm.Closed() {
		wk.ans.Error(w, r, httperr.NotReady(admission.ErrClosed))
		return
	}
	if wk.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := wk.cfg.Ready(ctx); err != nil {
			wk.ans.Error(w, r, httperr.NotReady(err))
			return
		}
	}
	st := adm.Stats()
	httperr.WriteJSON(w, http.StatusOK, map[string]any{"status": "ready", "admission": map[string]any{
		"slots": st.Slots, "queueDepth": st.QueueDepth, "running": st.Running, "queued": st.Queued,
	}})
}

// authorized compares the presented secret with the configured one in
// constant time.
func (wk *Worker) authorized(r *http.Request) bool {
	got := r.Header.Get(SecretHeader)
	return subtle.ConstantTimeCompare([]byte(got), []byte(wk.cfg.Secret)) == 1
}

// render is RenderPath: the bundle checked again, then SPEC §4's order on
// the worker's capacity (worker.Ticket): every request is a user of its
// own (gateways count their users), Fetch, a slot, the render.
func (wk *Worker) render(w http.ResponseWriter, r *http.Request) {
	if !wk.authorized(r) {
		wk.ans.Error(w, r, errSecret)
		return
	}
	var b Bundle
	r.Body = http.MaxBytesReader(w, r.Body, maxBundleBytes)
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			wk.ans.Error(w, r, errBundleTooBig)
			return
		}
		wk.ans.Error(w, r, errBundle)
		return
	}
	ctx := r.Context()
	checked, err := wk.cfg.Capacity.Pipeline().Check(b.Request())
	if err != nil {
		wk.ans.Error(w, r, err)
		return
	}
	t, err := wk.cfg.Capacity.Enter(gatewayUser(ctx))
	if err != nil {
		wk.refuse(w, r, err)
		return
	}
	defer t.Done()
	res, err := t.Render(ctx, checked)
	if err != nil {
		wk.refuse(w, r, err)
		return
	}
	t.Done()
	writePDF(w, res)
}

// writePDF answers with the PDF and what the gateway reads back besides:
// pages, title, CPU, memory and the warnings.
func writePDF(w http.ResponseWriter, res *render.Result) {
	h := w.Header()
	h.Set(headerTitle, url.QueryEscape(res.Title))
	h.Set(headerPages, strconv.Itoa(res.Pages))
	h.Set(headerCPU, strconv.FormatInt(res.CPU.Milliseconds(), 10))
	h.Set(headerMaxRSS, strconv.FormatInt(res.MaxRSS, 10))
	if len(res.Warnings) > 0 {
		if j, err := json.Marshal(res.Warnings); err == nil {
			h.Set(headerWarnings, base64.RawURLEncoding.EncodeToString(j))
		}
	}
	h.Set("Content-Type", "application/pdf")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(res.PDF)))
	w.WriteHeader(http.StatusOK)
	// The status is sent: a failed write means the gateway went away, and
	// it sees a short body against Content-Length.
	_, _ = w.Write(res.PDF)
}

// refuse answers a request admission refused in the worker's own shape,
// {"message","phase"} with Retry-After (busy 429, draining 503), so that
// the gateway moves on; any other error is the error list.
func (wk *Worker) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var ref *admission.Refusal
	status, message, phase, retry := http.StatusServiceUnavailable, "the worker is shutting down", phaseDraining, 1
	switch {
	case errors.As(err, &ref):
		status, message, phase, retry = http.StatusTooManyRequests, admission.BusyMessage, phaseAdmission, ref.RetryAfterSeconds()
	case errors.Is(err, admission.ErrClosed):
	default:
		wk.ans.Error(w, r, err)
		return
	}
	wk.log.InfoContext(r.Context(), "worker refused", "request_id", httperr.RequestID(r.Context()), "status", status, "phase", phase)
	w.Header().Set("Retry-After", strconv.Itoa(retry))
	httperr.WriteJSON(w, status, map[string]string{"message": message, "phase": phase})
}
