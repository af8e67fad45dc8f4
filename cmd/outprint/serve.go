package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	"github.com/outprint/outprint/internal/markdown"
	"github.com/outprint/outprint/internal/metrics"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/raster"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/web"
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
	// probeRetry is how often a failed TeX probe is tried again.
	probeRetry = 30 * time.Second
	// readyScrapeTimeout bounds the readiness check behind outprint_ready
	// in a scrape; a check that hangs reports not ready.
	readyScrapeTimeout = 2 * time.Second
)

// serveCmd is `outprint serve`: the HTTP gateway with local renders on one
// process (SPEC §1). It returns when ctx ends (SIGINT, SIGTERM) and the
// shutdown is done, or at once with exit code 2 when the configuration is
// wrong.
func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return roleCmd(ctx, roleServe, args, stdout, stderr)
}

// The process roles (README, "Running on several machines"): serve is
// everything in one process; a gateway takes the public API and sends
// renders to workers; a worker renders for gateways and runs queued jobs.
const (
	roleServe   = "serve"
	roleGateway = "gateway"
	roleWorker  = "worker"
)

// roleCmd is `outprint serve|gateway|worker [--config FILE]`.
func roleCmd(ctx context.Context, role string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "", "configuration file (default $"+config.EnvConfig+", else embedded defaults)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "outprint %s: unexpected argument %q\n%s", role, fs.Arg(0), usage)
		return exitUsage
	}
	env := os.Environ()
	path := config.Path(*configFile, env)
	cfg, err := config.Load(path, env)
	if err != nil {
		printConfigErrors(stderr, "outprint "+role, path, err)
		return exitUsage
	}
	if err := checkRole(role, cfg); err != nil {
		fmt.Fprintf(stderr, "outprint %s: %v\n", role, err)
		return exitUsage
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil)).With("role", role)
	return serve(ctx, cfg, log, serveHooks{role: role})
}

// checkRole refuses a configuration the role cannot run on.
func checkRole(role string, cfg *config.Config) error {
	if role == roleServe {
		return cfg.CheckListen()
	}
	if driver, _ := cfg.DatabaseDriver(); driver != "postgres" {
		return fmt.Errorf("database (OUTPRINT_DATABASE): the %s role needs PostgreSQL, shared by gateways and workers (got %s)", role, driver)
	}
	if cfg.Cluster.Secret == "" {
		return fmt.Errorf("cluster.secret (OUTPRINT_CLUSTER_SECRET): the %s role needs the cluster secret", role)
	}
	if role == roleGateway {
		if len(cfg.Gateway.Workers) == 0 {
			return errors.New("gateway.workers (OUTPRINT_GATEWAY_WORKERS): a gateway needs at least one worker URL")
		}
		return cfg.CheckListen()
	}
	return nil
}

// serveHooks let tests watch and steer serve; the command uses none.
type serveHooks struct {
	// listening receives the bound address once the listener is open
	// (tests listen on port 0).
	listening chan<- net.Addr
	// wrap wraps the render stage (tests hold renders at a gate).
	wrap func(httpapi.Renderer) httpapi.Renderer
	// role is roleServe (""), roleGateway or roleWorker.
	role string
}

// serve runs the service on cfg until ctx ends and returns the exit code.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, hooks serveHooks) int {
	tmp, err := prepareDataDir(cfg.DataDir)
	if err != nil {
		log.Error("data folder", "err", err, "setting", "dataDir (OUTPRINT_DATA_DIR)")
		return exitUsage
	}
	defer os.RemoveAll(tmp)

	// Listen before any TeX process starts: a port in use is an operator's
	// error to report at once. Connections wait in the backlog until
	// Serve below.
	role := hooks.role
	if role == "" {
		role = roleServe
	}
	listen, listenSetting := cfg.Listen, "listen (OUTPRINT_LISTEN)"
	if role == roleWorker {
		listen, listenSetting = cfg.Worker.Listen, "worker.listen (OUTPRINT_WORKER_LISTEN)"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		log.Error("cannot listen", "err", err, "setting", listenSetting)
		return exitUsage
	}
	defer ln.Close()

	// A gateway runs no TeX: its Render stage is the workers.
	engine := &engine{name: "workers", close: func() {}}
	if role != roleGateway {
		engine, err = newEngine(cfg, tmp)
		if err != nil {
			log.Error("TeX engine", "err", err)
			return exitInternal
		}
	}
	defer engine.close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)

	admCfg := admission.Config{
		Slots:       cfg.Admission.Slots,
		QueueDepth:  cfg.Admission.QueueDepth,
		PerUser:     cfg.Admission.PerUser,
		MaxWait:     cfg.Admission.MaxWait,
		RenderLimit: cfg.Render.Timeout,
	}
	if role == roleWorker {
		// One capacity for renders sent by gateways and queued jobs; a
		// full worker answers busy at once (no queue): the gateways
		// queue, and move on to another worker.
		capacity := cfg.Worker.Capacity
		if capacity == 0 {
			capacity = tex.DefaultCapacity()
		}
		admCfg.Slots, admCfg.QueueDepth, admCfg.PerUser = capacity, 0, capacity
	}
	adm := admission.New(admCfg)
	m.SetAdmissionSource(func() metrics.AdmissionStats {
		st := adm.Stats()
		return metrics.AdmissionStats{Slots: st.Slots, QueueDepth: st.QueueDepth, Running: st.Running, Queued: st.Queued}
	})
	if engine.stats != nil {
		m.SetPoolSource(engine.stats)
	}
	m.SetMemorySource(func() metrics.MemoryStats {
		used, limit := tex.Memory()
		return metrics.MemoryStats{Used: used, Limit: limit}
	})

	pipeline := render.New(render.Config{Engine: engine.Engine, Limits: cfg.Render.Limits(), TempDir: tmp})

	// One SSRF-safe client fetches external images from the allowed hosts
	// and talks to Outline.
	var (
		remote images.Source
		wiki   *outline.Client
	)
	if u := cfg.OutlineURL(); u != nil || len(cfg.Images.AllowHosts) > 0 {
		fc := fetch.New(fetch.Config{AllowHosts: cfg.Images.AllowHosts, Outline: u})
		defer fc.CloseIdleConnections()
		remote = fc.Images()
		if u != nil {
			wiki = outline.NewClient(u, fc)
		}
	}

	// The probe proves, once, that a whole render works (fonts, TeX,
	// xdvipdfmx); /readyz reports its outcome. It is owned by serve, which
	// stops it through probeCtx and waits for it before returning.
	probe := &texProbe{done: role == roleGateway} // a gateway has no TeX to probe
	probeCtx, stopProbe := context.WithCancel(ctx)
	var probeDone sync.WaitGroup
	if role != roleGateway {
		probeDone.Add(1)
		go func() {
			defer probeDone.Done()
			probe.run(probeCtx, pipeline, log)
		}()
	}
	defer probeDone.Wait()
	defer stopProbe()

	var renderer httpapi.Renderer = pipeline
	var workersReady func() error // a gateway is ready when a worker is
	if role == roleGateway {
		rr, err := httpapi.NewRemoteRenderer(httpapi.RemoteConfig{
			Workers: cfg.Gateway.Workers, Secret: cfg.Cluster.Secret, MaxPDFBytes: cfg.Render.MaxPDFBytes, Logger: log,
		})
		if err != nil {
			log.Error("gateway", "err", err)
			return exitUsage
		}
		renderer = rr
		stopWorkerProbe := startWorkerProbe(ctx, rr, m)
		defer stopWorkerProbe()
		workersReady = rr.Ready
	}
	if hooks.wrap != nil {
		renderer = hooks.wrap(renderer)
	}

	// Forms typeset their values on the same warm pool, synchronously
	// and as jobs.
	// A gateway has no TeX: forms are not offered there yet (the routes
	// answer 404) and a gateway's jobs of forms fail on the workers'
	// side only if a worker has no filler, which every worker has.
	lim := cfg.Render.Limits()
	var filler *forms.Filler
	if role != roleGateway {
		filler, err = forms.New(forms.Config{Timeout: lim.Timeout, MaxPages: lim.MaxPages, MaxPDFBytes: lim.MaxPDFBytes}, engine)
		if err != nil {
			log.Error("forms", "err", err)
			return exitInternal
		}
	}

	// Job callbacks (webhooks.go): the policy acceptance checks them
	// with, and the delivery the job service makes.
	policy, err := webhookPolicy(cfg)
	if err != nil {
		log.Error("webhooks", "err", err)
		return exitUsage
	}
	wh, whClient, err := webhookDelivery(cfg, policy, m)
	if err != nil {
		log.Error("webhooks", "err", err)
		return exitInternal
	}
	defer whClient.CloseIdleConnections()

	// Jobs render through the same Render stage and hold an admission
	// slot while they do (jobs.go). Their workers start with the server
	// and drain in shutdown.
	jr, err := openJobs(ctx, cfg, role, pipeline, renderer, filler, adm, m, wh, log)
	if err != nil {
		log.Error("jobs", "err", err, "setting", "database (OUTPRINT_DATABASE)")
		return exitInternal
	}
	defer jr.close()
	if err := jr.svc.Start(context.WithoutCancel(ctx)); err != nil {
		log.Error("jobs", "err", err)
		return exitInternal
	}
	// River's web console for admin keys. Its background services (count
	// caches) stop with consoleCtx when serve returns.
	consoleCtx, stopConsole := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsole()
	console, err := jr.svc.Console(consoleCtx, httpapi.ConsolePath, log)
	if err != nil {
		log.Error("jobs", "err", err)
		return exitInternal
	}
	ready := func(ctx context.Context) error {
		if err := probe.err(); err != nil {
			return err
		}
		if workersReady != nil {
			if err := workersReady(); err != nil {
				return err
			}
		}
		if err := jr.db.Ping(ctx); err != nil {
			return fmt.Errorf("job database: %w", err)
		}
		return checkWritable(cfg.DataDir)
	}
	m.SetReadySource(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), readyScrapeTimeout)
		defer cancel()
		return ready(ctx) == nil
	})
	site, err := web.New()
	if err != nil {
		log.Error("web page", "err", err)
		return exitInternal
	}
	// Thumbnails need pdftoppm; without it the page still works, with
	// no previews.
	var thumbs httpapi.Rasterizer
	if r, err := raster.New(raster.Config{}); err != nil {
		log.Warn("no page thumbnails", "err", err)
	} else {
		thumbs = r
	}
	api := httpapi.New(httpapi.Config{
		WorkerRole:    role == roleWorker,
		ClusterSecret: cfg.Cluster.Secret,
		Pipeline:      pipeline,
		Renderer:      renderer,
		Admission:     adm,
		Auth:          cfg,
		Anonymous:     cfg.Anonymous(),
		RemoteImages:  remote,
		Outline:       wiki,
		Jobs:          jr.svc,
		Forms:         filler,
		Ready:         ready,
		Metrics:       promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
		Console:       httpapi.Console{Handler: console, Admins: cfg, Anonymous: cfg.Admin.AllowAnonymous},
		Observer:      m,
		Logger:        log,
		Web:           site,
		Raster:        thumbs,
		Callbacks:     policy,
		PublicURL:     cfg.Webhooks.PublicURL,
		TempDir:       tmp,
	})

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
	go func() { served <- hs.Serve(ln) }() // ends when hs shuts down
	log.Info("listening", "addr", ln.Addr().String(), "url", "http://"+ln.Addr().String(),
		"anonymous", cfg.Anonymous(), "api_keys", len(cfg.Auth.APIKeys), "data_dir", cfg.DataDir,
		"slots", cfg.Admission.Slots, "queue_depth", cfg.Admission.QueueDepth, "per_user", cfg.Admission.PerUser,
		"max_wait", cfg.Admission.MaxWait.String(), "render_timeout", cfg.Render.Timeout.String(), "engine", engine.name)
	if hooks.listening != nil {
		hooks.listening <- ln.Addr()
	}

	code := exitOK
	select {
	case <-ctx.Done():
	case err := <-served:
		log.Error("server stopped", "err", err)
		code = exitInternal
	}
	shutdown(hs, ln, adm, jr, cancelBase, cfg.Shutdown.Grace, role == roleWorker, log)
	return code
}

// shutdown stops the service (SPEC §7): no new connections, queued
// requests answered 503 at once (admission.Close), no new job claimed,
// running renders and jobs given the grace period to finish, then stopped
// (jobs go back to the queue for the next process). A second SIGINT or
// SIGTERM skips the rest of the grace.
//
// A worker (answering) keeps its listener open while its renders finish:
// a gateway that sends it a render meanwhile hears 503 shutting_down with
// Retry-After (SPEC §4's {"message","phase"}) at once and moves on, where a
// closed port would look like a dead worker.
func shutdown(hs *http.Server, ln net.Listener, adm *admission.Controller, jr *jobRuntime, cancelBase context.CancelCauseFunc, grace time.Duration, answering bool, log *slog.Logger) {
	st := adm.Stats()
	log.Info("shutting down", "running", st.Running, "queued", st.Queued, "grace", grace.String())
	// Stop accepting before the queued requests hear 503, so that a
	// client told to come back cannot get in again through this process.
	// (hs.Shutdown closes it again and returns that error, which is why
	// the grace is judged by its context below, not by its result.)
	if !answering {
		ln.Close()
	}
	adm.Close()

	graceCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	go func() { // ends when the grace ends, one way or the other
		select {
		case <-again:
			log.Warn("second signal: stopping running renders now")
			cancel()
		case <-graceCtx.Done():
		}
	}()

	// The job workers drain beside the HTTP server, within the same grace.
	jobsDrained := make(chan struct{})
	go func() { // ends when the drain does: by the grace plus a bounded write-back
		defer close(jobsDrained)
		jr.drain(graceCtx, adm, log)
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

// prepareDataDir creates the data folder when missing and a scratch folder
// of this process inside it, for image conversion and TeX runs. The
// scratch folder is removed at exit.
func prepareDataDir(dir string) (tmp string, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create data folder: %w", err)
	}
	if err := checkWritable(dir); err != nil {
		return "", err
	}
	// Absolute, because TeX and the image converter run inside folders of
	// their own and get paths below this one.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("data folder: %w", err)
	}
	scratch := filepath.Join(abs, "tmp")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return "", fmt.Errorf("create scratch folder: %w", err)
	}
	return os.MkdirTemp(scratch, "serve-")
}

// checkWritable proves that dir takes a new file: /readyz calls it, so a
// full disk or a folder made read-only shows there.
func checkWritable(dir string) error {
	f, err := os.CreateTemp(dir, ".ready-")
	if err != nil {
		return fmt.Errorf("data folder %s is not writable: %w", dir, err)
	}
	name := f.Name()
	_, werr := f.Write([]byte("ok"))
	cerr := f.Close()
	os.Remove(name)
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("data folder %s is not writable: %w", dir, err)
	}
	return nil
}

// engine is the TeX engine serve renders with, and what the service needs
// from it besides Run: pool figures for /metrics and a close at exit.
type engine struct {
	render.Engine
	name  string
	stats func() metrics.PoolStats
	// close stops every TeX process the engine keeps; serve calls it after
	// the HTTP server and admission drained, so no render is cut off by it
	// unless the shutdown is forced.
	close func()
}

// poolClose bounds the pool's Close: by then no render holds a process, so
// it only stops idle and warming ones.
const poolClose = 10 * time.Second

// newEngine returns the warm pool (SPEC §7), sized by cfg.Pool, with the
// usual profile (A4, Latin) warmed ahead of the first request; other
// profiles get warm processes from their first render on.
func newEngine(cfg *config.Config, tmp string) (*engine, error) {
	pool, err := tex.NewPool(tex.PoolConfig{
		Runner: tex.RunnerConfig{
			TempDir:     tmp,
			Timeout:     cfg.Render.Timeout,
			MaxPDFBytes: cfg.Render.MaxPDFBytes,
		},
		Min:         cfg.Pool.Min,
		Max:         cfg.Pool.Max,
		IdleTimeout: cfg.Pool.IdleTimeout,
		Preambles:   []string{markdown.Preamble(markdown.Profile{Paper: "a4", Scripts: markdown.ScriptsOf("Latin")})},
	})
	if err != nil {
		return nil, err
	}
	return &engine{
		Engine: pool,
		name:   "warm pool",
		stats: func() metrics.PoolStats {
			st := pool.Stats()
			return metrics.PoolStats{
				Warm: st.Warm, Busy: st.Busy, Warming: st.Warming, Started: uint64(st.Started),
				Replaced: uint64(st.Replaced), Failures: uint64(st.Failures),
				Zygotes: st.Zygotes, ZygoteForks: uint64(st.Forked),
				ZygotesRetired: uint64(st.ZygotesRetired), Zygote: st.ZygoteOff == "",
			}
		},
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), poolClose)
			defer cancel()
			pool.Close(ctx)
		},
	}, nil
}

// texProbe is the outcome of rendering a tiny document at startup.
type texProbe struct {
	mu      sync.Mutex
	done    bool
	failure error
}

var errProbing = errors.New("the TeX probe is still running")

// err returns nil once the probe passed, errProbing while it runs, and
// the probe's failure after it failed.
func (p *texProbe) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.done:
		return nil
	case p.failure != nil:
		return p.failure
	}
	return errProbing
}

// run renders a one-line document through the whole pipeline, again every
// probeRetry until it passes or ctx ends.
func (p *texProbe) run(ctx context.Context, pl *render.Pipeline, log *slog.Logger) {
	for {
		start := time.Now()
		_, err := pl.Do(ctx, render.Request{Name: "probe.md", Markdown: []byte("# outprint\n\nready\n")}, nil)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.done, p.failure = err == nil, err
		p.mu.Unlock()
		if err == nil {
			log.Info("TeX probe passed", "duration_ms", time.Since(start).Milliseconds())
			return
		}
		log.Error("TeX probe failed; /readyz answers 503 until it passes", "err", err, "retry", probeRetry.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(probeRetry):
		}
	}
}

// printConfigErrors writes every configuration error on its own line,
// naming the file, so an operator fixes them in one pass.
func printConfigErrors(w io.Writer, cmd, path string, err error) {
	where := "the environment and embedded defaults"
	if path != "" {
		where = path + " and the environment"
	}
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	fmt.Fprintf(w, "%s: the configuration (%s) is not valid:\n", cmd, where)
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
