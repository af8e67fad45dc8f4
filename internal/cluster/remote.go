package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
)

// DefaultWorkerDownFor is how long a gateway leaves a worker alone after a
// failed call or a draining answer before it tries it again.
const DefaultWorkerDownFor = 2 * time.Second

// RemoteConfig configures a Remote.
type RemoteConfig struct {
	// Workers are the workers' base URLs (gateway.workers). A host name
	// that resolves to several addresses is one worker per address.
	Workers []string
	// Secret is the cluster secret presented to workers.
	Secret string
	// MaxPDFBytes bounds a PDF read back from a worker (default
	// limits.MaxPDFBytes).
	MaxPDFBytes int64
	// DownFor is how long a worker that failed is skipped (default
	// DefaultWorkerDownFor).
	DownFor time.Duration
	// ProbeInterval is the pause between two rounds of Probe (default
	// DefaultProbeInterval); ProbeTimeout bounds each /readyz call
	// (default DefaultProbeTimeout).
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
	// Client carries the calls (default: a client of its own).
	Client *http.Client
	// Logger receives worker failures (default: discard).
	Logger *slog.Logger
}

// Remote is the Render stage of a gateway: it sends the prepared
// document to a worker and returns the worker's PDF. It tries the workers
// in turn, starting after the one it used last: a busy (429), draining
// (503) or unreachable worker passes the request on to the next, and a
// worker that failed is skipped for DownFor, so a worker that went away
// costs one failed call and is tried again once it may be back. While
// Probe runs, workers whose /readyz answered ready come first and workers
// that answered not ready (draining, starting) are tried only after every
// other one refused. When no
// worker takes the request, Render returns an *admission.Refusal (busy)
// whose Retry-After is the smallest a worker asked for. A document error a
// worker reports is returned as the *limits.Error it wrote. It implements
// worker.Renderer.
type Remote struct {
	cfg    RemoteConfig
	client *http.Client
	log    *slog.Logger
	next   atomic.Uint64

	mu   sync.Mutex
	down map[string]time.Time // endpoint → skip until
	// What Probe found: the addresses of its last round and each one's
	// readiness. Until its first round ends, Render resolves the workers
	// itself on every call.
	probed     map[string]probeState
	resolved   []string
	probedOnce bool
}

// WithDefaults returns c with every unset field at its default: the
// Default* bounds, a client of its own (no proxy from the environment:
// workers are on the operator's network, named by the operator) and no
// logs.
func (c RemoteConfig) WithDefaults() RemoteConfig {
	if c.MaxPDFBytes <= 0 {
		c.MaxPDFBytes = limits.MaxPDFBytes
	}
	if c.DownFor <= 0 {
		c.DownFor = DefaultWorkerDownFor
	}
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		tr.Proxy = nil
		c.Client = &http.Client{Transport: tr}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate refuses a configuration a gateway cannot dispatch with, naming
// the setting.
func (c RemoteConfig) validate() error {
	if len(c.Workers) == 0 {
		return errors.New("gateway.workers: a gateway needs at least one worker URL")
	}
	if c.Secret == "" {
		return errors.New("cluster.secret: a gateway needs the cluster secret (OUTPRINT_CLUSTER_SECRET)")
	}
	for _, w := range c.Workers {
		if u, err := url.Parse(w); err != nil || u.Host == "" {
			return fmt.Errorf("gateway.workers: %q is not a worker URL", w)
		}
	}
	return nil
}

// NewRemote returns a renderer on cfg's workers.
func NewRemote(cfg RemoteConfig) (*Remote, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	return &Remote{cfg: cfg, client: cfg.Client, log: cfg.Logger, down: map[string]time.Time{}, probed: map[string]probeState{}}, nil
}

// endpoints resolves the workers: one base URL per address of each host.
func (rr *Remote) endpoints(ctx context.Context) []string {
	var out []string
	for _, w := range rr.cfg.Workers {
		u, _ := url.Parse(w)
		host, port := u.Hostname(), u.Port()
		if net.ParseIP(host) != nil {
			out = append(out, w)
			continue
		}
		addrs, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil || len(addrs) == 0 {
			rr.log.Warn("gateway: worker host does not resolve", "worker", w, "err", err)
			continue
		}
		for _, a := range addrs {
			v := *u
			v.Host = net.JoinHostPort(a, port)
			out = append(out, v.String())
		}
	}
	return out
}

// Render sends pr to a worker; see Remote.
func (rr *Remote) Render(ctx context.Context, pr *render.Prepared, _ func(render.Progress)) (*render.Result, error) {
	body, err := json.Marshal(NewBundle(pr))
	if err != nil {
		return nil, fmt.Errorf("gateway: encode bundle: %w", err)
	}
	a, err := rr.dispatch(ctx, RenderPath, body)
	if err != nil {
		return nil, err
	}
	res := &render.Result{PDF: a.data}
	res.Pages, _ = strconv.Atoi(a.header.Get(headerPages))
	res.Title, _ = url.QueryUnescape(a.header.Get(headerTitle))
	if ms, err := strconv.ParseInt(a.header.Get(headerCPU), 10, 64); err == nil {
		res.CPU = time.Duration(ms) * time.Millisecond
	}
	res.MaxRSS, _ = strconv.ParseInt(a.header.Get(headerMaxRSS), 10, 64)
	res.Warnings = readWarnings(a.header)
	return res, nil
}

// readWarnings reads the warnings header a worker's answer carries.
func readWarnings(h http.Header) []limits.Problem {
	w := h.Get(headerWarnings)
	if w == "" {
		return nil
	}
	j, err := base64.RawURLEncoding.DecodeString(w)
	if err != nil {
		return nil
	}
	out, _ := httperr.Parse([]byte(`{"errors":` + string(j) + `}`))
	return out
}

// workerAnswer is a worker's 200 answer: its headers and body.
type workerAnswer struct {
	header http.Header
	data   []byte
}

// dispatch posts body to path on one worker after another, in the order
// of Remote, until one answers 200 or a document error; see Remote.
func (rr *Remote) dispatch(ctx context.Context, path string, body []byte) (*workerAnswer, error) {
	rr.mu.Lock()
	eps := slices.Clone(rr.resolved)
	probing := rr.probedOnce
	rr.mu.Unlock()
	if !probing {
		eps = rr.endpoints(ctx)
	}
	if len(eps) == 0 {
		return nil, &admission.Refusal{Code: limits.CodeBusy, RetryAfter: time.Second}
	}
	eps = rr.order(eps)
	retry := time.Duration(0)
	for _, ep := range eps {
		a, after, err := rr.call(ctx, ep, path, body)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case after > 0: // busy or draining: the next one
			if retry == 0 || after < retry {
				retry = after
			}
			continue
		case err == nil:
			rr.mark(ep, false)
			return a, nil
		}
		var le *limits.Error
		if errors.As(err, &le) {
			return nil, err // the document's problem: the same everywhere
		}
		rr.log.Warn("gateway: worker failed", "worker", ep, "path", path, "err", err)
		rr.mark(ep, true)
	}
	if retry == 0 {
		retry = time.Second
	}
	return nil, &admission.Refusal{Code: limits.CodeBusy, RetryAfter: retry}
}

// order is the order Render tries eps in: starting after the worker used
// last, the workers the probe found ready first, then those not probed
// yet; workers marked down or not ready go to the end, tried only when
// every other one refused.
func (rr *Remote) order(eps []string) []string {
	start := int(rr.next.Add(1))
	now := time.Now()
	var ready, unknown, downs []string
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for i := range eps {
		ep := eps[(start+i)%len(eps)]
		st, known := rr.probed[ep]
		switch {
		case now.Before(rr.down[ep]) || known && !st.ready:
			downs = append(downs, ep)
		case known:
			ready = append(ready, ep)
		default:
			unknown = append(unknown, ep)
		}
	}
	return slices.Concat(ready, unknown, downs)
}

func (rr *Remote) mark(ep string, down bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if down {
		rr.down[ep] = time.Now().Add(rr.cfg.DownFor)
	} else {
		delete(rr.down, ep)
	}
}

// call posts body to path on one worker. A busy or draining answer
// returns its Retry-After (draining also marks the worker down); a
// document error the *limits.Error; anything else an error that moves on
// to the next.
func (rr *Remote) call(ctx context.Context, ep, path string, body []byte) (*workerAnswer, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep+path, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SecretHeader, rr.cfg.Secret)
	resp, err := rr.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	// Closing the body only releases the connection: the answer's errors
	// are ReadAll's.
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, rr.cfg.MaxPDFBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read answer: %w", err)
	}
	retryAfter := func() time.Duration {
		n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || n < 1 {
			n = 1
		}
		return time.Duration(n) * time.Second
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		if int64(len(data)) > rr.cfg.MaxPDFBytes {
			return nil, 0, errors.New("worker sent an answer above the PDF limit")
		}
		return &workerAnswer{header: resp.Header, data: data}, 0, nil
	case resp.StatusCode == http.StatusTooManyRequests:
		return nil, retryAfter(), nil
	case resp.StatusCode == http.StatusServiceUnavailable:
		rr.mark(ep, true)
		return nil, retryAfter(), nil
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, 0, errors.New("the worker refused the cluster secret (cluster.secret differs)")
	}
	// An error list under a status some kind has (the document's 422, a
	// render out of time's 504, …) is the gateway's answer too: the one
	// map of kinds and statuses reads it back.
	if le, ok := httperr.Read(resp.StatusCode, data); ok {
		return nil, 0, le
	}
	return nil, 0, fmt.Errorf("worker answered %s", resp.Status)
}
