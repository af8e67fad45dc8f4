// Package service assembles an outprint process: `outprint serve` (the
// HTTP API with local renders), `outprint gateway` (the HTTP API, renders
// sent to workers) and `outprint worker` (renders for gateways and queued
// jobs). It owns what a process needs around the request handlers of
// httpapi: the data folder and its scratch space, the listener, the TeX
// engine and its start-up probe behind /readyz, admission, the job
// service on its database and store, webhooks delivery, metrics, and the
// shutdown sequence of SPEC §7.
//
// The shape follows wtf's Main: New assembles everything from a loaded
// configuration and fails with an error naming what is wrong; Run serves
// until its context ends and then shuts down within the grace period;
// Close releases what New acquired. The command line (cmd/outprint) only
// loads the configuration, calls these three and turns the result into an
// exit code.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/httpapi"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/metrics"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/raster"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/web"
)

// Role is what a process does (README, "Running on several machines").
type Role string

// The process roles: serve is everything in one process; a gateway takes
// the public API and sends renders to workers; a worker renders for
// gateways and runs queued jobs.
const (
	RoleServe   Role = "serve"
	RoleGateway Role = "gateway"
	RoleWorker  Role = "worker"
)

// Bounds of the HTTP server itself. Request bodies are bounded by httpapi
// (size and BodyTimeout), answers by its WriteTimeout from their first
// byte (http.Server's WriteTimeout would count the render too); these
// bound what comes before and after.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	// forcedStop bounds the wait for renders after the grace period ran
	// out and their contexts were cancelled: cancelling kills the TeX
	// process group, so they end within moments.
	forcedStop = 5 * time.Second
	// readyScrapeTimeout bounds the readiness check behind outprint_ready
	// in a scrape; a check that hangs reports not ready.
	readyScrapeTimeout = 2 * time.Second
)

// Options are what a process needs besides its configuration. The zero
// value but Logger is what the command uses; the other fields let tests
// (and Go programs embedding outprint) watch and steer the process.
type Options struct {
	// Role is RoleServe when empty.
	Role Role
	// Logger receives the process's logs; nil means slog.Default().
	Logger *slog.Logger
	// Hurry, when it is closed or receives, ends the grace period of a
	// shutdown already begun (the command closes it on a second SIGINT or
	// SIGTERM). Nil means the grace always runs its course.
	Hurry <-chan struct{}
	// WrapRenderer wraps the render stage (tests hold renders at a gate).
	WrapRenderer func(httpapi.Renderer) httpapi.Renderer
	// Failpoint is the job service's crash-test hook
	// (jobs.Config.Failpoint); nil in the shipped binary.
	Failpoint func(point string)
}

// SettingError is a failure the operator fixes in the configuration: the
// command answers it with its usage exit code, not an internal error.
type SettingError struct {
	// Setting names the configuration key and its variable, for example
	// "dataDir (OUTPRINT_DATA_DIR)"; empty when the error text names it.
	Setting string
	Err     error
}

func (e *SettingError) Error() string {
	if e.Setting == "" {
		return e.Err.Error()
	}
	return e.Setting + ": " + e.Err.Error()
}

func (e *SettingError) Unwrap() error { return e.Err }

// Main is one assembled outprint process.
type Main struct {
	cfg  *config.Config
	role Role
	log  *slog.Logger
	opts Options

	tmp    string
	ln     net.Listener
	engine *engine
	reg    *prometheus.Registry
	adm    *admission.Controller
	pl     *render.Pipeline
	jr     *jobRuntime
	probe  *texProbe
	// remote is a gateway's dispatcher to its workers (nil otherwise):
	// Run probes the workers' /readyz through it, and the gateway is
	// ready when one of them is.
	remote *httpapi.RemoteRenderer
	// apiCfg is completed by Run with the jobs console, which needs
	// the job service running.
	apiCfg httpapi.Config

	// closers release what New acquired, in reverse order (Close).
	closers []func() error
}

// CheckRole refuses a configuration the role cannot run on. New calls it;
// the command calls it first to print the refusal without a log line.
func CheckRole(role Role, cfg *config.Config) error {
	switch role {
	case RoleServe, "":
		return cfg.CheckListen()
	case RoleGateway, RoleWorker:
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	if driver, _ := cfg.DatabaseDriver(); driver != "postgres" {
		return fmt.Errorf("database (OUTPRINT_DATABASE): the %s role needs PostgreSQL, shared by gateways and workers (got %s)", role, driver)
	}
	if cfg.Cluster.Secret == "" {
		return fmt.Errorf("cluster.secret (OUTPRINT_CLUSTER_SECRET): the %s role needs the cluster secret", role)
	}
	if role == RoleGateway {
		if len(cfg.Gateway.Workers) == 0 {
			return errors.New("gateway.workers (OUTPRINT_GATEWAY_WORKERS): a gateway needs at least one worker URL")
		}
		return cfg.CheckListen()
	}
	return nil
}

// New assembles the process cfg describes: it prepares the data folder,
// opens the listener (connections wait in its backlog until Run), starts
// the TeX engine and opens the job database and store. A configuration
// the process cannot run on is a *SettingError; any other error is
// internal. On error everything acquired so far is released.
func New(ctx context.Context, cfg *config.Config, opts Options) (_ *Main, err error) {
	if opts.Role == "" {
		opts.Role = RoleServe
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := CheckRole(opts.Role, cfg); err != nil {
		return nil, &SettingError{Err: err}
	}
	m := &Main{cfg: cfg, role: opts.Role, log: opts.Logger, opts: opts}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	role, log := m.role, m.log

	tmp, err := prepareDataDir(cfg.DataDir)
	if err != nil {
		return nil, &SettingError{Setting: "dataDir (OUTPRINT_DATA_DIR)", Err: err}
	}
	m.tmp = tmp
	m.onClose(func() error { return os.RemoveAll(tmp) })

	// Listen before any TeX process starts: a port in use is an operator's
	// error to report at once.
	listen, listenSetting := cfg.Listen, "listen (OUTPRINT_LISTEN)"
	if role == RoleWorker {
		listen, listenSetting = cfg.Worker.Listen, "worker.listen (OUTPRINT_WORKER_LISTEN)"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, &SettingError{Setting: listenSetting, Err: err}
	}
	m.ln = ln
	m.onClose(func() error {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	})

	// A gateway runs no TeX: its Render stage is the workers.
	m.engine = &engine{name: "workers", close: func() {}}
	if role != RoleGateway {
		if m.engine, err = newEngine(cfg, tmp); err != nil {
			return nil, fmt.Errorf("TeX engine: %w", err)
		}
	}
	eng := m.engine
	m.onClose(func() error { eng.close(); return nil })

	m.reg = prometheus.NewRegistry()
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mt := metrics.New(m.reg)

	admCfg := admission.Config{
		Slots:       cfg.Admission.Slots,
		QueueDepth:  cfg.Admission.QueueDepth,
		PerUser:     cfg.Admission.PerUser,
		MaxWait:     cfg.Admission.MaxWait,
		RenderLimit: cfg.Render.Timeout,
	}
	if role == RoleWorker {
		// One capacity for renders sent by gateways and queued jobs; a
		// full worker answers busy at once (no queue): the gateways
		// queue, and move on to another worker.
		capacity := cfg.Worker.Capacity
		if capacity == 0 {
			capacity = tex.DefaultCapacity()
		}
		admCfg.Slots, admCfg.QueueDepth, admCfg.PerUser = capacity, 0, capacity
	}
	adm, err := admission.New(admCfg)
	if err != nil {
		return nil, &SettingError{Setting: "admission", Err: err}
	}
	m.adm = adm
	mt.SetAdmissionSource(func() metrics.AdmissionStats {
		st := adm.Stats()
		return metrics.AdmissionStats{Slots: st.Slots, QueueDepth: st.QueueDepth, Running: st.Running, Queued: st.Queued}
	})
	if eng.stats != nil {
		mt.SetPoolSource(eng.stats)
	}
	mt.SetMemorySource(func() metrics.MemoryStats {
		used, limit := tex.Memory()
		return metrics.MemoryStats{Used: used, Limit: limit}
	})

	m.pl = render.New(render.Config{Engine: eng.Engine, Limits: cfg.Render.Limits(), TempDir: tmp})
	// Without the emoji image set renders still succeed, with emoji as
	// black outlines: the operator learns it here, once.
	if d := m.pl.EmojiDir(); d != "" {
		log.Info("emoji images", "dir", d)
	} else {
		log.Warn("no emoji image set: emoji print as Symbola outlines; scripts/emoji.sh installs it", "dir", render.DefaultEmojiDir)
	}

	// One SSRF-safe client fetches external images from the allowed hosts
	// and talks to Outline.
	var (
		remote images.Source
		wiki   *outline.Client
	)
	if u := cfg.OutlineURL(); u != nil || len(cfg.Images.AllowHosts) > 0 {
		fc := fetch.New(fetch.Config{AllowHosts: cfg.Images.AllowHosts, Outline: u})
		m.onClose(func() error { fc.CloseIdleConnections(); return nil })
		remote = fc.Images()
		if u != nil {
			wiki = outline.NewClient(u, fc)
		}
	}

	// The probe proves, once, that a whole render works (fonts, TeX,
	// xdvipdfmx); /readyz reports its outcome. Run starts it.
	m.probe = &texProbe{done: role == RoleGateway} // a gateway has no TeX to probe

	var renderer httpapi.Renderer = m.pl
	if role == RoleGateway {
		rr, err := httpapi.NewRemoteRenderer(httpapi.RemoteConfig{
			Workers: cfg.Gateway.Workers, Secret: cfg.Cluster.Secret, MaxPDFBytes: cfg.Render.MaxPDFBytes, Logger: log,
		})
		if err != nil {
			return nil, &SettingError{Setting: "gateway.workers (OUTPRINT_GATEWAY_WORKERS)", Err: err}
		}
		renderer = rr
		m.remote = rr
		mt.SetWorkerSource(func() []metrics.WorkerStatus {
			ws := rr.Workers()
			out := make([]metrics.WorkerStatus, len(ws))
			for i, w := range ws {
				out[i] = metrics.WorkerStatus{Worker: w.URL, Ready: w.Ready}
			}
			return out
		})
	}
	if opts.WrapRenderer != nil {
		renderer = opts.WrapRenderer(renderer)
	}

	// Forms typeset their values on the same warm pool, synchronously
	// and as jobs. A gateway has no TeX: forms are not offered there yet
	// (the routes answer 404), and its jobs of forms are filled by the
	// workers, which all have a filler.
	lim := cfg.Render.Limits()
	var filler *forms.Filler
	if role != RoleGateway {
		filler, err = forms.New(forms.Config{Timeout: lim.Timeout, MaxPages: lim.MaxPages, MaxPDFBytes: lim.MaxPDFBytes}, eng)
		if err != nil {
			return nil, fmt.Errorf("forms: %w", err)
		}
	}

	// Job callbacks (webhooks.go): the policy acceptance checks them
	// with, and the delivery the job service makes.
	policy, err := WebhookPolicy(cfg)
	if err != nil {
		return nil, &SettingError{Err: fmt.Errorf("webhooks: %w", err)}
	}
	wh, whClient, err := webhookDelivery(cfg, policy, mt)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	m.onClose(func() error { whClient.CloseIdleConnections(); return nil })

	// Jobs render through the same Render stage and hold an admission
	// slot while they do (jobs.go). Their workers start in Run and drain
	// in its shutdown.
	m.jr, err = openJobs(ctx, cfg, role, m.pl, renderer, filler, adm, mt, wh, opts.Failpoint, log)
	if err != nil {
		return nil, fmt.Errorf("jobs (database, OUTPRINT_DATABASE): %w", err)
	}
	jr := m.jr
	m.onClose(func() error { jr.close(); return nil })

	ready := m.ready
	mt.SetReadySource(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), readyScrapeTimeout)
		defer cancel()
		return ready(ctx) == nil
	})
	site, err := web.New()
	if err != nil {
		return nil, fmt.Errorf("web page: %w", err)
	}
	// Thumbnails need pdftoppm; without it the page still works, with
	// no previews.
	var thumbs httpapi.Rasterizer
	if r, err := raster.New(raster.Config{}); err != nil {
		log.Warn("no page thumbnails", "err", err)
	} else {
		thumbs = r
	}
	m.apiCfg = httpapi.Config{
		WorkerRole:    role == RoleWorker,
		ClusterSecret: cfg.Cluster.Secret,
		Pipeline:      m.pl,
		Renderer:      renderer,
		Admission:     adm,
		Auth:          cfg,
		Anonymous:     cfg.Anonymous(),
		RemoteImages:  remote,
		Outline:       wiki,
		Jobs:          jr.svc,
		Forms:         filler,
		Ready:         ready,
		Metrics:       promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}),
		Observer:      mt,
		Logger:        log,
		Web:           site,
		Raster:        thumbs,
		Callbacks:     policy,
		PublicURL:     cfg.Webhooks.PublicURL,
		TempDir:       tmp,
	}
	return m, nil
}

// onClose adds a release step for Close.
func (m *Main) onClose(f func() error) { m.closers = append(m.closers, f) }

// Addr is the address the process listens on (tests listen on port 0).
func (m *Main) Addr() net.Addr { return m.ln.Addr() }

// ready is /readyz: the TeX probe passed, a gateway has a ready worker,
// the job database answers and the data folder takes a file.
func (m *Main) ready(ctx context.Context) error {
	if err := m.probe.err(); err != nil {
		return err
	}
	if m.remote != nil {
		if err := m.remote.Ready(); err != nil {
			return err
		}
	}
	if err := m.jr.db.Ping(ctx); err != nil {
		return fmt.Errorf("job database: %w", err)
	}
	return checkWritable(m.cfg.DataDir)
}

// Run serves until ctx ends, then shuts down (SPEC §7) within the grace
// period of the configuration and returns. It returns an error when the
// job service could not start or the HTTP server stopped by itself; the
// shutdown runs in either case. Call Run once, then Close.
func (m *Main) Run(ctx context.Context) error {
	log, role := m.log, m.role

	// The probe is owned by Run, which stops it through probeCtx and
	// waits for it before returning.
	probeCtx, stopProbe := context.WithCancel(ctx)
	var probeDone sync.WaitGroup
	if role != RoleGateway {
		probeDone.Add(1)
		go func() {
			defer probeDone.Done()
			m.probe.run(probeCtx, m.pl, log)
		}()
	}
	defer probeDone.Wait()
	defer stopProbe()
	if m.remote != nil {
		// A gateway probes its workers' /readyz (httpapi.RemoteRenderer.Probe)
		// through the shutdown grace too, since it still sends renders
		// then: the probe ends when Run returns, after the shutdown.
		workersCtx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
		probeDone.Add(1)
		go func() {
			defer probeDone.Done()
			m.remote.Probe(workersCtx)
		}()
		defer stopWorkers()
	}

	if err := m.jr.svc.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	// River's web console for admin keys. Its background services (count
	// caches) stop with consoleCtx when Run returns.
	consoleCtx, stopConsole := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsole()
	console, err := m.jr.svc.Console(consoleCtx, httpapi.ConsolePath, log)
	if err != nil {
		m.jr.drain(ctx, m.adm, log)
		return fmt.Errorf("jobs: %w", err)
	}
	apiCfg := m.apiCfg
	apiCfg.Console = httpapi.Console{Handler: console, Admins: m.cfg, Anonymous: m.cfg.Admin.AllowAnonymous}
	api, err := httpapi.New(apiCfg)
	if err != nil {
		m.jr.drain(ctx, m.adm, log)
		return fmt.Errorf("HTTP API: %w", err)
	}

	// Request contexts derive from base. When the grace period runs out,
	// base is cancelled with admission.ErrClosed as its cause: running
	// renders stop (their TeX process groups are killed) and httpapi
	// answers them 503 shutting_down.
	base, cancelBase := context.WithCancelCause(context.Background())
	defer cancelBase(nil)
	hs := &http.Server{
		Handler:           api.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(m.ln) }() // ends when hs shuts down
	cfg := m.cfg
	log.Info("listening", "addr", m.ln.Addr().String(), "url", "http://"+m.ln.Addr().String(),
		"anonymous", cfg.Anonymous(), "api_keys", len(cfg.Auth.APIKeys), "data_dir", cfg.DataDir,
		"slots", cfg.Admission.Slots, "queue_depth", cfg.Admission.QueueDepth, "per_user", cfg.Admission.PerUser,
		"max_wait", cfg.Admission.MaxWait.String(), "render_timeout", cfg.Render.Timeout.String(), "engine", m.engine.name)

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-served:
		runErr = fmt.Errorf("HTTP server stopped: %w", err)
	}
	m.shutdown(hs, cancelBase)
	return runErr
}

// shutdown stops the service (SPEC §7): no new connections, queued
// requests answered 503 at once (admission.Close), no new job claimed,
// running renders and jobs given the grace period to finish, then stopped
// (jobs go back to the queue for the next process). Options.Hurry skips
// the rest of the grace.
//
// A worker keeps its listener open while its renders finish: a gateway
// that sends it a render meanwhile hears 503 shutting_down with
// Retry-After (SPEC §4's {"message","phase"}) at once and moves on, where a
// closed port would look like a dead worker.
func (m *Main) shutdown(hs *http.Server, cancelBase context.CancelCauseFunc) {
	log, adm, grace := m.log, m.adm, m.cfg.Shutdown.Grace
	answering := m.role == RoleWorker
	st := adm.Stats()
	log.Info("shutting down", "running", st.Running, "queued", st.Queued, "grace", grace.String())
	// Stop accepting before the queued requests hear 503, so that a
	// client told to come back cannot get in again through this process.
	// (hs.Shutdown closes it again and returns that error, which is why
	// the grace is judged by its context below, not by its result.)
	if !answering {
		m.ln.Close()
	}
	adm.Close()

	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	go func() { // ends when the grace ends, one way or the other
		select {
		case <-m.opts.Hurry:
			log.Warn("second signal: stopping running renders now")
			cancel()
		case <-graceCtx.Done():
		}
	}()

	// The job workers drain beside the HTTP server, within the same grace.
	jobsDrained := make(chan struct{})
	go func() { // ends when the drain does: by the grace plus a bounded write-back
		defer close(jobsDrained)
		m.jr.drain(graceCtx, adm, log)
	}()

	if answering {
		select {
		case <-adm.Drained():
		case <-graceCtx.Done():
		}
	}
	if hs.Shutdown(graceCtx); graceCtx.Err() != nil {
		st := adm.Stats()
		log.Warn("grace period over: stopping running renders", "running", st.Running)
		cancelBase(admission.ErrClosed)
		forceCtx, cancelForce := context.WithTimeout(context.Background(), forcedStop)
		defer cancelForce()
		if hs.Shutdown(forceCtx); forceCtx.Err() != nil {
			hs.Close()
		}
	}
	<-jobsDrained
	// Every handler has returned or been cut off; wait for the tickets of
	// any handler still unwinding so no render outlives the process.
	select {
	case <-adm.Drained():
	case <-time.After(forcedStop):
		log.Error("renders still running at exit", "running", adm.Stats().Running)
	}
	log.Info("stopped")
}

// Close releases what New acquired: the job database, the TeX engine's
// processes, idle connections, the listener and the scratch folder. Call
// it after Run returned (or instead of Run).
func (m *Main) Close() error {
	var errs []error
	for i := len(m.closers) - 1; i >= 0; i-- {
		errs = append(errs, m.closers[i]())
	}
	m.closers = nil
	return errors.Join(errs...)
}
