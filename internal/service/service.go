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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/cluster"
	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/diagram"
	"github.com/outprint/outprint/internal/httpapi"
	"github.com/outprint/outprint/internal/metrics"
	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/webhook"
	"github.com/outprint/outprint/internal/worker"
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
	WrapRenderer func(worker.Renderer) worker.Renderer
	// Failpoint is the job service's crash-test hook
	// (jobs.Config.Failpoint); nil in the shipped binary.
	Failpoint func(point string)
	// Formats, when set, keeps the TeX pool's dumped formats, shared with
	// the other pools of this process that use it (tex.PoolConfig.Formats:
	// tests start many services); nil in the shipped binary, whose pool
	// keeps formats of its own.
	Formats *tex.Formats
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
	mt     *metrics.Metrics
	adm    *admission.Controller
	pl     *render.Pipeline
	// drawer draws diagrams for the pipeline; nil on a gateway and when
	// diagrams are off.
	drawer *diagram.Drawer
	// office converts Office documents (office.go); nil on a gateway and
	// where LibreOffice is not installed. officeState is what the
	// startup log says of it.
	office      *office.Pool
	officeState string
	jr          *jobRuntime
	// probe renders a document at startup for /readyz; nil on a gateway,
	// which has no TeX.
	probe *texProbe
	// pools are the engines /readyz asks each time (the TeX pool; none
	// on a gateway).
	pools []*readyCache
	// remote is a gateway's dispatcher to its workers (nil otherwise):
	// Run probes the workers' /readyz through it, and the gateway is
	// ready when one of them is.
	remote *cluster.Remote
	// capacity runs synchronous work in the order of SPEC §4.
	capacity *worker.Capacity
	// listener makes the process's HTTP handler once the job service runs
	// (the public API needs its console): the public API, or a worker's
	// listener.
	listener func(console http.Handler) (http.Handler, error)
	// webhooks is the callback policy acceptance checks with.
	webhooks *webhook.Policy
	// keepListening is a worker's shutdown: it answers 503 while its
	// renders finish, so gateways move on instead of seeing a dead port.
	keepListening bool

	// closers release what New acquired, in reverse order (Close).
	closers []func() error
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
			_ = m.Close() // the construction error is the one to report
		}
	}()
	switch m.role {
	case RoleGateway:
		err = m.assembleGateway(ctx)
	case RoleWorker:
		err = m.assembleWorker(ctx)
	default:
		err = m.assembleServe(ctx)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// onClose adds a release step for Close.
func (m *Main) onClose(f func() error) { m.closers = append(m.closers, f) }

// Addr is the address the process listens on (tests listen on port 0).
func (m *Main) Addr() net.Addr { return m.ln.Addr() }

// ready is /readyz: the TeX probe passed, the pools say they can render
// now, a gateway has a ready worker, the job database answers and the
// data folder takes a file.
func (m *Main) ready(ctx context.Context) error {
	if m.probe != nil {
		if err := m.probe.err(); err != nil {
			return err
		}
	}
	for _, p := range m.pools {
		if err := p.ready(ctx); err != nil {
			return err
		}
	}
	if m.remote != nil {
		if err := m.remote.Ready(); err != nil {
			return err
		}
	}
	if err := m.jr.db.Ping(ctx); err != nil {
		return fmt.Errorf("job database: %w", err)
	}
	return checkWritable(dataDir(m.cfg))
}

// startProbes starts the probes Run owns and returns what stops them and
// waits: the TeX probe behind /readyz (not on a gateway), which ends with
// ctx, and a gateway's probe of its workers' /readyz
// (cluster.Remote.Probe), which goes on through the shutdown grace, since
// the gateway still sends renders then.
func (m *Main) startProbes(ctx context.Context) (stop func()) {
	var wg sync.WaitGroup
	probeCtx, stopProbe := context.WithCancel(ctx)
	if m.probe != nil {
		wg.Go(func() { m.probe.run(probeCtx, m.pl, m.log) })
	}
	workersCtx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	if m.remote != nil {
		wg.Go(func() { m.remote.Probe(workersCtx) })
	}
	return func() {
		stopProbe()
		stopWorkers()
		wg.Wait()
	}
}

// Run serves until ctx ends, then shuts down (SPEC §7) within the grace
// period of the configuration and returns. It returns an error when the
// job service could not start or the HTTP server stopped by itself; the
// shutdown runs in either case. Call Run once, then Close.
func (m *Main) Run(ctx context.Context) error {
	log := m.log
	defer m.startProbes(ctx)()

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
	handler, err := m.listener(console)
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
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(m.ln) }() // ends when hs shuts down
	cfg, ac := m.cfg, m.adm.Config()
	log.Info("listening", "addr", m.ln.Addr().String(), "url", "http://"+m.ln.Addr().String(),
		"anonymous", cfg.Anonymous(), "api_keys", len(cfg.Auth.APIKeys), "data_dir", dataDir(cfg),
		"slots", ac.Slots, "queue_depth", ac.QueueDepth, "per_user", ac.PerUser,
		"max_wait", ac.MaxWait.String(), "preview_slots", m.capacity.Previews().Config().Slots, "render_timeout", m.pl.Limits().Timeout.String(), "engine", m.engine.name,
		"office", m.officeState)

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
	log, adm, grace := m.log, m.adm, shutdownGrace(m.cfg)
	answering := m.keepListening
	st := adm.Stats()
	log.Info("shutting down", "running", st.Running, "queued", st.Queued, "grace", grace.String())
	// Stop accepting before the queued requests hear 503, so that a
	// client told to come back cannot get in again through this process.
	// (hs.Shutdown closes it again and returns that error, which is why
	// the grace is judged by its context below, not by its result.)
	if !answering {
		_ = m.ln.Close()
	}
	adm.Close()
	// Previews waiting for a place hear 503 as renders do; a drawing
	// finishes within its own timeout, and hs.Shutdown waits for it.
	if m.capacity != nil {
		m.capacity.Previews().Close()
	}

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
	_ = hs.Shutdown(graceCtx) // judged by its context, as said above
	if graceCtx.Err() != nil {
		st := adm.Stats()
		log.Warn("grace period over: stopping running renders", "running", st.Running)
		cancelBase(admission.ErrClosed)
		forceCtx, cancelForce := context.WithTimeout(context.Background(), forcedStop)
		defer cancelForce()
		_ = hs.Shutdown(forceCtx)
		if forceCtx.Err() != nil {
			_ = hs.Close() // the last resort; nothing is left to try
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
