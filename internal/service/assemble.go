package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/cluster"
	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/httpapi"
	"github.com/outprint/outprint/internal/images"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/metrics"
	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/raster"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/web"
	"github.com/outprint/outprint/internal/worker"
)

// Each role is one straight assembly of the shared pieces below: the core
// (data folder, listener, metrics), the engine, admission and the
// pipeline, the Render stage, the job service, and the listener's handler.

// assembleServe is `outprint serve`: everything in one process.
func (m *Main) assembleServe(ctx context.Context) error {
	if err := m.openCore(listenAddr(m.cfg), "listen (OUTPRINT_LISTEN)"); err != nil {
		return err
	}
	if err := m.startEngine(); err != nil {
		return err
	}
	if err := m.openDiagrams(admissionConfig(m.cfg).Slots); err != nil {
		return err
	}
	m.openOffice(ctx, admissionConfig(m.cfg).Slots)
	if err := m.openAdmission(admissionConfig(m.cfg)); err != nil {
		return err
	}
	filler, err := m.openForms()
	if err != nil {
		return err
	}
	renderer := m.wrap(m.pl)
	if err := m.openCapacity(renderer); err != nil {
		return err
	}
	runtime := worker.NewJobs(worker.JobsConfig{Pipeline: m.pl, Renderer: renderer, Forms: filler, Office: m.converter(), Observer: m.mt})
	if err := m.openJobs(ctx, runtime); err != nil {
		return err
	}
	return m.publicAPI(filler, m.converter())
}

// assembleGateway is `outprint gateway`: the public API, its Render stage
// the workers; jobs are inserted here and rendered by the workers. It runs
// no TeX and no qpdf: forms are read, checked and filled by a worker
// (cluster.Remote), under the gateway's capacity as renders are.
func (m *Main) assembleGateway(ctx context.Context) error {
	if err := m.openCore(listenAddr(m.cfg), "listen (OUTPRINT_LISTEN)"); err != nil {
		return err
	}
	m.engine = &engine{name: "workers", close: func() {}}
	if err := m.openAdmission(admissionConfig(m.cfg)); err != nil {
		return err
	}
	remote, err := cluster.NewRemote(cluster.RemoteConfig{
		Workers: m.cfg.Gateway.Workers, Secret: m.cfg.Cluster.Secret, MaxPDFBytes: m.pl.Limits().MaxPDFBytes, Logger: m.log,
	})
	if err != nil {
		return &SettingError{Setting: "gateway.workers (OUTPRINT_GATEWAY_WORKERS)", Err: err}
	}
	m.remote = remote
	m.mt.SetWorkerSource(func() []metrics.WorkerStatus {
		ws := remote.Workers()
		out := make([]metrics.WorkerStatus, len(ws))
		for i, w := range ws {
			out[i] = metrics.WorkerStatus{Worker: w.URL, Ready: w.Ready}
		}
		return out
	})
	if err := m.openCapacity(m.wrap(remote)); err != nil {
		return err
	}
	if err := m.openJobs(ctx, nil); err != nil {
		return err
	}
	m.officeState = "workers"
	return m.publicAPI(remote, remote)
}

// assembleWorker is `outprint worker`: renders for gateways and queued
// jobs from one capacity, behind the worker's listener (cluster.Worker).
func (m *Main) assembleWorker(ctx context.Context) error {
	if err := m.openCore(workerListenAddr(m.cfg), "worker.listen (OUTPRINT_WORKER_LISTEN)"); err != nil {
		return err
	}
	if err := m.startEngine(); err != nil {
		return err
	}
	if err := m.openDiagrams(workerAdmission(m.cfg).Slots); err != nil {
		return err
	}
	m.openOffice(ctx, workerAdmission(m.cfg).Slots)
	if err := m.openAdmission(workerAdmission(m.cfg)); err != nil {
		return err
	}
	filler, err := m.openForms()
	if err != nil {
		return err
	}
	renderer := m.wrap(m.pl)
	if err := m.openCapacity(renderer); err != nil {
		return err
	}
	runtime := worker.NewJobs(worker.JobsConfig{Pipeline: m.pl, Renderer: renderer, Forms: filler, Office: m.converter(), Observer: m.mt})
	if err := m.openJobs(ctx, runtime); err != nil {
		return err
	}
	m.keepListening = true
	m.listener = func(http.Handler) (http.Handler, error) {
		wk, err := cluster.NewWorker(cluster.WorkerConfig{
			Capacity: m.capacity, Secret: m.cfg.Cluster.Secret, Forms: filler, Office: m.converter(), Ready: m.ready,
			Metrics: m.metricsHandler(), ObserveRequest: m.mt.ObserveRequest, Logger: m.log,
		})
		if err != nil {
			return nil, err
		}
		return wk.Handler(), nil
	}
	return nil
}

// openCore prepares the data folder and its scratch folder, opens the
// listener at addr before any TeX process starts (a port in use is an
// operator's error to report at once; connections wait in its backlog
// until Run) and makes the metrics registry.
func (m *Main) openCore(addr, setting string) error {
	tmp, err := prepareDataDir(dataDir(m.cfg))
	if err != nil {
		return &SettingError{Setting: "dataDir (OUTPRINT_DATA_DIR)", Err: err}
	}
	m.tmp = tmp
	m.onClose(func() error { return os.RemoveAll(tmp) })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return &SettingError{Setting: setting, Err: err}
	}
	m.ln = ln
	m.onClose(func() error {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	})
	m.reg = prometheus.NewRegistry()
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.mt = metrics.New(m.reg)
	// The failure and result series the dashboard and alerts read exist
	// from the first scrape, at 0, for every code a job or render ends
	// with.
	m.mt.Known(append(limits.Codes(), jobs.CodeExhausted, jobs.CodeInputMissing),
		append(limits.Codes(), worker.ResultOK, worker.ResultCanceled))
	// Conversions: every format's successes and duration from the first
	// scrape; its failures appear with the first one (13 formats by every
	// code would be hundreds of series at 0).
	m.mt.KnownOffice(office.Formats(), []string{worker.ResultOK})
	m.mt.SetMemorySource(func() metrics.MemoryStats {
		used, limit := tex.Memory()
		return metrics.MemoryStats{Used: used, Limit: limit}
	})
	m.mt.SetReadySource(func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), readyScrapeTimeout)
		defer cancel()
		return m.ready(ctx) == nil
	})
	return nil
}

// startEngine starts the warm TeX pool and the probe that proves, once,
// that a whole render works (fonts, TeX, xdvipdfmx); /readyz reports its
// outcome, and Run starts it. After the probe /readyz asks the pool each
// time (its warm-ups keep succeeding).
func (m *Main) startEngine() error {
	eng, err := newEngine(m.cfg, m.tmp, m.opts.Formats)
	if err != nil {
		return fmt.Errorf("TeX engine: %w", err)
	}
	m.engine = eng
	m.onClose(func() error { eng.close(); return nil })
	m.mt.SetPoolSource(eng.stats)
	m.probe = &texProbe{}
	m.pools = append(m.pools, newReadyCache("TeX pool", eng.pool))
	return nil
}

// openAdmission makes the capacity's controller and the render pipeline
// on the engine and the diagram drawer (a gateway's has neither: it
// checks and fetches only).
func (m *Main) openAdmission(ac admission.Config) error {
	adm, err := admission.New(ac)
	if err != nil {
		return &SettingError{Setting: "admission", Err: err}
	}
	m.adm = adm
	m.mt.SetAdmissionSource(func() metrics.AdmissionStats {
		st := adm.Stats()
		return metrics.AdmissionStats{Slots: st.Slots, QueueDepth: st.QueueDepth, Running: st.Running, Queued: st.Queued}
	})
	rc := render.Config{Engine: m.engine.Engine, Limits: m.cfg.Render.Limits(), TempDir: m.tmp}
	if m.drawer != nil {
		// Only a drawer that exists: a nil *diagram.Drawer in the
		// interface would not read as "off".
		rc.Diagrams = m.drawer
	}
	m.pl = render.New(rc)
	// Without the emoji image set renders still succeed, with emoji as
	// black outlines: the operator learns it here, once.
	if d := m.pl.EmojiDir(); d != "" {
		m.log.Info("emoji images", "dir", d)
	} else {
		m.log.Warn("no emoji image set: emoji print as Symbola outlines; scripts/emoji.sh installs it", "dir", render.DefaultEmojiDir)
	}
	return nil
}

// openForms makes the form filler: forms typeset their values on the same
// warm pool, synchronously and as jobs.
func (m *Main) openForms() (*forms.Filler, error) {
	lim := m.pl.Limits()
	filler, err := forms.New(forms.Config{Timeout: lim.Timeout, MaxPages: lim.MaxPages, MaxPDFBytes: lim.MaxPDFBytes, TempDir: m.tmp}, m.engine)
	if err != nil {
		return nil, fmt.Errorf("forms: %w", err)
	}
	return filler, nil
}

// wrap is the Render stage as Options.WrapRenderer makes it.
func (m *Main) wrap(r worker.Renderer) worker.Renderer {
	if m.opts.WrapRenderer != nil {
		return m.opts.WrapRenderer(r)
	}
	return r
}

// openCapacity makes the capacity of SPEC §4 on the Render stage r, with
// its pool of page previews apart from the render slots.
func (m *Main) openCapacity(r worker.Renderer) error {
	c, err := worker.New(worker.Config{Pipeline: m.pl, Renderer: r, Admission: m.adm, Observer: m.mt, PreviewSlots: previewSlots(m.cfg)})
	if err != nil {
		return err
	}
	m.capacity = c
	return nil
}

// openJobs opens the job service (jobs.go) with its webhooks; runtime
// renders the jobs (nil: an insert-only gateway). Its workers start in
// Run and drain in its shutdown.
func (m *Main) openJobs(ctx context.Context, runtime jobs.Renderer) error {
	policy, err := WebhookPolicy(m.cfg)
	if err != nil {
		return &SettingError{Err: fmt.Errorf("webhooks: %w", err)}
	}
	wh, whClient, err := webhookDelivery(m.cfg, policy, m.mt)
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	m.onClose(func() error { whClient.CloseIdleConnections(); return nil })
	m.jr, err = openJobs(ctx, m.cfg, runtime, m.adm, m.mt, wh, m.opts.Failpoint, m.log)
	if err != nil {
		return fmt.Errorf("jobs (database, OUTPRINT_DATABASE): %w", err)
	}
	jr := m.jr
	m.onClose(func() error { jr.close(); return nil })
	m.webhooks = policy
	return nil
}

// metricsHandler serves the process's registry.
func (m *Main) metricsHandler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// publicAPI sets the listener of serve and gateway: the public API
// (httpapi) with what serves outside Markdown renders — Outline and
// external images through one SSRF-safe client, forms and Office
// documents (the local filler and LibreOffice pool, or on a gateway the
// workers), the page for people and page thumbnails — and, once the job
// service runs, River's console for admin keys.
func (m *Main) publicAPI(filler httpapi.FormFiller, conv worker.Converter) error {
	cfg := m.cfg
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
	site, err := web.New()
	if err != nil {
		return fmt.Errorf("web page: %w", err)
	}
	// Thumbnails need pdftoppm; without it the page still works, with no
	// previews.
	var thumbs httpapi.Rasterizer
	if r, err := raster.New(raster.Config{TempDir: m.tmp}); err != nil {
		m.log.Warn("no page thumbnails", "err", err)
	} else {
		thumbs = r
	}
	api := httpapi.Config{
		Capacity: m.capacity, Auth: cfg, Anonymous: cfg.Anonymous(), RemoteImages: remote, Outline: wiki,
		Jobs: m.jr.svc, Forms: filler, Office: conv, Ready: m.ready, Metrics: m.metricsHandler(), Observer: m.mt, Logger: m.log,
		Web: site, Raster: thumbs, Callbacks: m.webhooks, PublicURL: cfg.Webhooks.PublicURL, TempDir: m.tmp,
	}
	m.listener = func(console http.Handler) (http.Handler, error) {
		api.Console = httpapi.Console{Handler: console, Admins: cfg, Anonymous: cfg.Admin.AllowAnonymous}
		s, err := httpapi.New(api)
		if err != nil {
			return nil, err
		}
		return s.Handler(), nil
	}
	return nil
}
