// Package metrics defines outprint's Prometheus metrics (SPEC §5,
// Operations) on a registry the caller passes in. There are no package-level
// collectors and nothing registers itself: cmd/outprint makes one registry,
// hands it to New, and serves it on /metrics, so tests can use a fresh
// registry each and two servers in one process never collide.
//
// Metrics imports nothing of outprint. Figures that live in another
// package (admission state, the TeX pool, the job table) come in through
// small structs of this package filled by functions the caller sets with
// SetAdmissionSource, SetPoolSource, SetJobSource, SetMemorySource and
// SetReadySource; cmd adapts admission.Stats, the tex pool's figures, the
// cgroup's memory and the readiness check to them. The functions run
// during a scrape, so they must be cheap and safe for concurrent use.
// Events (a refusal, a finished render, a queue wait) are recorded by the
// code that sees them through the Observe and count methods.
//
// A nil *Metrics records nothing, so packages can take one optionally.
package metrics

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every metric name.
const Namespace = "outprint"

// AdmissionStats is the admission state a scrape reports. cmd fills it
// from admission.Stats.
type AdmissionStats struct {
	Slots      int // configured slots
	QueueDepth int // configured queue depth
	Running    int // renders holding a slot
	Queued     int // requests waiting for a slot
}

// PoolStats is the TeX warm pool's state a scrape reports. cmd fills it
// from the tex package's pool figures.
type PoolStats struct {
	Warm     int    // processes warm and idle, ready for a document
	Busy     int    // processes typesetting a document
	Warming  int    // processes starting up (loading the format and fonts)
	Started  uint64 // processes started since the pool began
	Replaced uint64 // processes replaced after use, death, hang or idle timeout
	Failures uint64 // processes that failed to start or to warm up
	// Zygotes are ready to fork warm processes; ZygoteForks counts the
	// processes forked from them, ZygotesRetired the zygotes replaced.
	// Zygote is false while the pool cannot fork (no C compiler, zygotes
	// off): every warm process then warms up by itself.
	Zygotes        int
	ZygoteForks    uint64
	ZygotesRetired uint64
	Zygote         bool
}

// JobStats is the job table's state a scrape reports. The jobs package
// fills it; a database query behind it should be cached, because scrapes
// must stay fast.
type JobStats struct {
	Queued    int
	Running   int
	Succeeded int
	Failed    int
	Cancelled int
	// OldestQueued is the age of the oldest job still queued, 0 when none
	// is.
	OldestQueued time.Duration
}

// MemoryStats is the memory a scrape reports: what the service's cgroup
// (outprint and its TeX processes) uses, against its limit. cmd fills it
// from the tex package.
type MemoryStats struct {
	// Used is the cgroup's memory use (v2 memory.current, v1
	// memory.usage_in_bytes), or the machine's (MemTotal - MemAvailable)
	// when there is no cgroup to read; 0 when neither can be read.
	Used int64
	// Limit is the cgroup's memory limit, or the machine's memory; 0
	// when neither can be read.
	Limit int64
}

// WorkerStatus is one worker a gateway sends renders to, as its last
// /readyz probe found it. cmd fills it from the gateway's renderer. The
// worker label is the worker's base URL, one per address the operator's
// gateway.workers resolve to: a bounded set the operator configures.
type WorkerStatus struct {
	Worker string
	Ready  bool
}

// Finished job states pre-created so that rates over them exist from the
// start; they match jobs.StateSucceeded, StateFailed and StateCancelled.
var finishedStates = []string{"succeeded", "failed", "cancelled"}

// OtherRoute is the route label of requests no route matched (404s):
// the label holds registered route patterns only, never a client's path.
const OtherRoute = "other"

// Refusal codes pre-created so that their series exist (at 0) before the
// first refusal; they match limits.CodeBusy and limits.CodeUserLimit.
var refusalCodes = []string{"busy", "user_limit"}

// Histogram buckets, in seconds. Render durations span a 60 ms warm
// one-pager to the 60 s limit; queue waits span an immediate slot to
// maxWait; job queue delays run up to an hour of backlog.
var (
	renderBuckets   = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 20, 30, 45, 60, 90}
	waitBuckets     = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60}
	jobDelayBuckets = []float64{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
	// requestBuckets start below a millisecond: /healthz answers in
	// microseconds and a probe's latency is what they show; renders held
	// open run to the render limit.
	requestBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
	// diagramBuckets span a warm document's diagrams (a tenth of a
	// second) to a cold browser's start and the 10 s bound of each of
	// many diagrams.
	diagramBuckets = []float64{0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 3, 5, 10, 20, 30, 60}
)

// Metrics holds outprint's collectors. Create it with New.
type Metrics struct {
	refusals       *prometheus.CounterVec
	renderDuration *prometheus.HistogramVec
	queueWait      prometheus.Histogram
	peakMemory     atomic.Int64
	jobQueueDelay  prometheus.Histogram
	jobFailures    *prometheus.CounterVec
	jobRetries     prometheus.Counter
	jobAccepted    prometheus.Counter
	jobFinished    *prometheus.CounterVec
	requests       *prometheus.HistogramVec
	webhooks       *prometheus.CounterVec
	diagrams       *prometheus.CounterVec
	diagramDraw    *prometheus.HistogramVec
	browsersEnded  *prometheus.CounterVec
	conversions    *prometheus.CounterVec
	convDuration   *prometheus.HistogramVec
	convQueue      prometheus.Histogram
	sources        *sourceCollector
}

// New creates the collectors and registers them with reg. It panics when
// reg already holds collectors of the same names, like
// prometheus.MustRegister: that is a wiring bug, found at startup.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "admission", Name: "refusals_total",
			Help: "Render requests refused by admission control (429), by code: busy or user_limit.",
		}, []string{"code"}),
		renderDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "render", Name: "duration_seconds",
			Help:    "Wall-clock time of renders that held a slot, by result: ok or the error code.",
			Buckets: renderBuckets,
		}, []string{"result"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "admission", Name: "queue_wait_seconds",
			Help:    "Time render requests waited in the admission queue for a slot, whether they got one or not.",
			Buckets: waitBuckets,
		}),
		jobQueueDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "job", Name: "queue_delay_seconds",
			Help:    "Time from a job's acceptance to the start of its render.",
			Buckets: jobDelayBuckets,
		}),
		jobFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "job", Name: "failures_total",
			Help: "Jobs that ended failed, by error code.",
		}, []string{"code"}),
		jobRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "job", Name: "retries_total",
			Help: "Job attempts scheduled again after a transient failure.",
		}),
		jobAccepted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "job", Name: "accepted_total",
			Help: "Jobs accepted (202; an idempotent repeat is not counted): the arrival rate of jobs.",
		}),
		jobFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "job", Name: "finished_total",
			Help: "Jobs that ended, by final state: succeeded, failed or cancelled (the completion rate).",
		}, []string{"state"}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time to answer HTTP requests, by route (the registered pattern, \"other\" for unknown paths) and status code.",
			Buckets: requestBuckets,
		}, []string{"route", "code"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "webhook", Name: "deliveries_total",
			Help: "Webhook delivery attempts, by outcome: delivered, retry (failed, tried again later) or dead (given up).",
		}, []string{"outcome"}),
		diagrams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "diagram", Name: "diagrams_total",
			Help: "Diagrams of rendered documents, by engine (mermaid, graphviz) and outcome: drawn, cached, invalid (422), too_large (413: a time or memory bound) or error (no browser, the render ended).",
		}, []string{"engine", "outcome"}),
		diagramDraw: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "diagram", Name: "draw_duration_seconds",
			Help:    "Time to draw one document's diagrams of an engine that the cache did not answer, by engine.",
			Buckets: diagramBuckets,
		}, []string{"engine"}),
		browsersEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "diagram", Name: "browser_restarts_total",
			Help: "Chromium processes of the diagram pool that ended and are replaced when needed, by cause: worn (served its documents), stopped (a diagram's bound or a cancelled render), crashed, idle, failed_start.",
		}, []string{"cause"}),
		conversions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "office", Name: "conversions_total",
			Help: "Office document conversions, by format (docx, xlsx, …) and result: ok or the error code.",
		}, []string{"format", "result"}),
		convDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "office", Name: "conversion_duration_seconds",
			Help:    "Wall-clock time of Office conversions that ran (holding a slot), by format.",
			Buckets: renderBuckets,
		}, []string{"format"}),
		convQueue: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "office", Name: "queue_delay_seconds",
			Help:    "Time synchronous Office conversions waited in the admission queue for a slot.",
			Buckets: waitBuckets,
		}),
		sources: newSourceCollector(),
	}
	for _, code := range refusalCodes {
		m.refusals.WithLabelValues(code)
	}
	for _, state := range finishedStates {
		m.jobFinished.WithLabelValues(state)
	}
	for _, o := range webhookOutcomes {
		m.webhooks.WithLabelValues(o)
	}
	peak := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "render", Name: "peak_memory_bytes",
		Help: "Largest maximum resident set size of any render process since the service started.",
	}, func() float64 { return float64(m.peakMemory.Load()) })
	reg.MustRegister(m.refusals, m.renderDuration, m.queueWait, peak,
		m.jobQueueDelay, m.jobFailures, m.jobRetries, m.jobAccepted, m.jobFinished, m.requests, m.webhooks,
		m.diagrams, m.diagramDraw, m.browsersEnded, m.conversions, m.convDuration, m.convQueue, m.sources)
	return m
}

// Known makes the series of the labels a caller knows in advance exist
// at 0 from the first scrape: outprint_job_failures_total for each job
// failure code and outprint_render_duration_seconds for each render
// result. A panel or an alert over a series that appears only with its
// first event says "No data" until then, and a rate over it starts late.
// The caller passes bounded sets (the codes of package limits and of
// package jobs); labels outside them still count when they happen.
func (m *Metrics) Known(jobFailureCodes, renderResults []string) {
	if m == nil {
		return
	}
	for _, c := range jobFailureCodes {
		m.jobFailures.WithLabelValues(c)
	}
	for _, r := range renderResults {
		m.renderDuration.WithLabelValues(r)
	}
}

// KnownDiagrams makes the diagram series exist at 0 from the first
// scrape: drawn diagrams for each engine and outcome, draw durations for
// each engine, browser restarts for each cause (the diagram package's
// label sets; a process that draws no diagrams does not call it).
func (m *Metrics) KnownDiagrams(engines, outcomes, causes []string) {
	if m == nil {
		return
	}
	for _, e := range engines {
		m.diagramDraw.WithLabelValues(e)
		for _, o := range outcomes {
			m.diagrams.WithLabelValues(e, o)
		}
	}
	for _, c := range causes {
		m.browsersEnded.WithLabelValues(c)
	}
}

// DiagramDrawn counts one diagram of a rendered document by engine and
// outcome (package diagram's bounded sets).
func (m *Metrics) DiagramDrawn(engine, outcome string) {
	if m != nil {
		m.diagrams.WithLabelValues(engine, outcome).Inc()
	}
}

// ObserveDiagramDraw records how long one document's diagrams of engine
// took to draw.
func (m *Metrics) ObserveDiagramDraw(engine string, d time.Duration) {
	if m != nil {
		m.diagramDraw.WithLabelValues(engine).Observe(d.Seconds())
	}
}

// BrowserRetired counts one Chromium process of the diagram pool that
// ended, by cause.
func (m *Metrics) BrowserRetired(cause string) {
	if m != nil {
		m.browsersEnded.WithLabelValues(cause).Inc()
	}
}

// KnownOffice makes the conversion series of every format and result a
// caller knows exist at 0 from the first scrape (a process that converts
// Office documents: serve, worker, a gateway); the sets are bounded (the
// formats of package office, the codes of package limits).
func (m *Metrics) KnownOffice(formats, results []string) {
	if m == nil {
		return
	}
	for _, f := range formats {
		m.convDuration.WithLabelValues(f)
		for _, r := range results {
			m.conversions.WithLabelValues(f, r)
		}
	}
}

// ObserveConversion records one Office conversion by format and result;
// d is the time it ran, 0 for one refused before it ran (counted, not
// timed).
func (m *Metrics) ObserveConversion(format, result string, d time.Duration) {
	if m == nil {
		return
	}
	m.conversions.WithLabelValues(format, result).Inc()
	if d > 0 {
		m.convDuration.WithLabelValues(format).Observe(d.Seconds())
	}
}

// ObserveConversionQueue records how long one synchronous conversion
// waited for its slot.
func (m *Metrics) ObserveConversionQueue(d time.Duration) {
	if m != nil {
		m.convQueue.Observe(d.Seconds())
	}
}

// OfficeStats is the state of the warm LibreOffice processes a scrape
// reports. service fills it from the office pool's figures.
type OfficeStats struct {
	// RSS is each process's resident memory, by slot (a bounded set: the
	// pool has one process per slot).
	RSS []int64
	// Restarts counts process replacements by cause (timeout, crash,
	// conversions, memory, …: the pool's bounded set).
	Restarts map[string]uint64
}

// SetOfficeSource makes scrapes report the LibreOffice processes' memory
// and restarts from f. Until it is set (no Office conversion here) those
// series are absent.
func (m *Metrics) SetOfficeSource(f func() OfficeStats) {
	if m != nil {
		m.sources.office.Store(&f)
	}
}

// SetAdmissionSource makes scrapes report admission running, queued, slots
// and queue depth from f. Until it is set those series are absent.
func (m *Metrics) SetAdmissionSource(f func() AdmissionStats) {
	if m != nil {
		m.sources.admission.Store(&f)
	}
}

// SetPoolSource makes scrapes report the TeX pool gauges and counters from
// f. Until it is set (a gateway without local workers never sets it) those
// series are absent.
func (m *Metrics) SetPoolSource(f func() PoolStats) {
	if m != nil {
		m.sources.pool.Store(&f)
	}
}

// SetJobSource makes scrapes report jobs by state and the oldest queued
// job's age from f. Until it is set those series are absent.
func (m *Metrics) SetJobSource(f func() JobStats) {
	if m != nil {
		m.sources.jobs.Store(&f)
	}
}

// SetMemorySource makes scrapes report the memory used and its limit
// from f. Until it is set those series are absent; a figure of 0 (not
// readable) is left out.
func (m *Metrics) SetMemorySource(f func() MemoryStats) {
	if m != nil {
		m.sources.memory.Store(&f)
	}
}

// SetReadySource makes scrapes report outprint_ready, 1 when f reports
// the service ready (the check behind /readyz) and 0 when not. Until it
// is set the series is absent.
func (m *Metrics) SetReadySource(f func() bool) {
	if m != nil {
		m.sources.ready.Store(&f)
	}
}

// SetWorkerSource makes scrapes report outprint_gateway_worker_ready, one
// series per worker f lists (1 ready, 0 not). Workers f no longer lists
// (an address that stopped resolving) drop out of the scrape. Until it is
// set (every role but the gateway) the series are absent.
func (m *Metrics) SetWorkerSource(f func() []WorkerStatus) {
	if m != nil {
		m.sources.workers.Store(&f)
	}
}

// Refused counts one admission refusal with its code (busy, user_limit).
func (m *Metrics) Refused(code string) {
	if m != nil {
		m.refusals.WithLabelValues(code).Inc()
	}
}

// ObserveRender records the duration of one render that held a slot;
// result is "ok" or the error code it ended with (a limits code, so the
// label stays bounded).
func (m *Metrics) ObserveRender(d time.Duration, result string) {
	if m != nil {
		m.renderDuration.WithLabelValues(result).Observe(d.Seconds())
	}
}

// ObserveQueueWait records how long one request waited for a slot,
// including waits that ended in a refusal or a disconnect, and 0 for a
// request that found a free slot.
func (m *Metrics) ObserveQueueWait(d time.Duration) {
	if m != nil {
		m.queueWait.Observe(d.Seconds())
	}
}

// ObserveRenderMemory records the maximum resident set size of one render
// process in bytes; the gauge keeps the largest seen.
func (m *Metrics) ObserveRenderMemory(bytes int64) {
	if m == nil {
		return
	}
	for {
		old := m.peakMemory.Load()
		if bytes <= old || m.peakMemory.CompareAndSwap(old, bytes) {
			return
		}
	}
}

// ObserveJobQueueDelay records the time from a job's acceptance to the
// start of its render.
func (m *Metrics) ObserveJobQueueDelay(d time.Duration) {
	if m != nil {
		m.jobQueueDelay.Observe(d.Seconds())
	}
}

// JobFailed counts one job that ended failed with code.
func (m *Metrics) JobFailed(code string) {
	if m != nil {
		m.jobFailures.WithLabelValues(code).Inc()
	}
}

// JobRetried counts one job attempt scheduled again.
func (m *Metrics) JobRetried() {
	if m != nil {
		m.jobRetries.Inc()
	}
}

// JobAccepted counts one job accepted (a new job, not an idempotent
// repeat).
func (m *Metrics) JobAccepted() {
	if m != nil {
		m.jobAccepted.Inc()
	}
}

// JobFinished counts one job that ended in state (succeeded, failed or
// cancelled); code is a failed job's failure code, empty for any other
// end. The code is counted first, so a scrape that sees the job among the
// finished ones sees its code too (a dashboard's ratio of the two, and
// cmd/outprint's TestMetricsOfRealProcess, once caught the moment
// between them).
func (m *Metrics) JobFinished(state, code string) {
	if m == nil {
		return
	}
	if code != "" {
		m.JobFailed(code)
	}
	m.jobFinished.WithLabelValues(state).Inc()
}

// ObserveRequest records the time to answer one HTTP request. route must
// come from a bounded set (a registered route pattern, or OtherRoute), never
// from the request's path; status is the HTTP status code.
func (m *Metrics) ObserveRequest(route string, status int, d time.Duration) {
	if m != nil {
		m.requests.WithLabelValues(route, strconv.Itoa(status)).Observe(d.Seconds())
	}
}

// DeclareRoutes makes the request series of each route (a registered
// pattern) exist at zero for the answer the dashboard and the alerts
// read (200), so their panels and rates have data from the first scrape.
func (m *Metrics) DeclareRoutes(routes ...string) {
	if m == nil {
		return
	}
	for _, r := range routes {
		m.requests.WithLabelValues(r, "200")
	}
}

// webhookOutcomes are the outcome labels of webhook deliveries, the only
// ones WebhookAttempt records (jobs.WebhookOutcome*): the label stays
// bounded whatever a receiver answers.
var webhookOutcomes = []string{"delivered", "retry", "dead"}

// WebhookAttempt counts one webhook delivery attempt by outcome; an
// outcome not in webhookOutcomes is ignored.
func (m *Metrics) WebhookAttempt(outcome string) {
	if m == nil {
		return
	}
	for _, o := range webhookOutcomes {
		if o == outcome {
			m.webhooks.WithLabelValues(o).Inc()
			return
		}
	}
}

// sourceCollector reports the figures other packages own, read through
// the functions set on Metrics at scrape time. A source that is not set
// reports nothing; Prometheus allows a collector to send fewer metrics than
// it describes.
type sourceCollector struct {
	admission atomic.Pointer[func() AdmissionStats]
	pool      atomic.Pointer[func() PoolStats]
	jobs      atomic.Pointer[func() JobStats]
	memory    atomic.Pointer[func() MemoryStats]
	ready     atomic.Pointer[func() bool]
	workers   atomic.Pointer[func() []WorkerStatus]
	office    atomic.Pointer[func() OfficeStats]

	running, queued, slots, queueDepth  *prometheus.Desc
	warm, busy, warming                 *prometheus.Desc
	started, replaced                   *prometheus.Desc
	failures                            *prometheus.Desc
	jobsByState, oldestQueued           *prometheus.Desc
	memoryUsed, memoryLimit             *prometheus.Desc
	readyDesc                           *prometheus.Desc
	workerReady                         *prometheus.Desc
	zygotes, zygoteForks, zygoteRetired *prometheus.Desc
	zygoteOn                            *prometheus.Desc
	officeRSS, officeRestarts           *prometheus.Desc
}

func newSourceCollector() *sourceCollector {
	d := func(subsystem, name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, subsystem, name), help, labels, nil)
	}
	return &sourceCollector{
		running:        d("admission", "running", "Renders holding an admission slot."),
		queued:         d("admission", "queued", "Render requests waiting in the admission queue."),
		slots:          d("admission", "slots", "Configured admission slots (admission.slots)."),
		queueDepth:     d("admission", "queue_depth", "Configured admission queue depth (admission.queueDepth)."),
		warm:           d("tex_pool", "warm", "Warm TeX processes idle and ready for a document."),
		busy:           d("tex_pool", "busy", "TeX processes typesetting a document."),
		warming:        d("tex_pool", "warming", "TeX processes starting up: loading the format and fonts before they can take a document."),
		started:        d("tex_pool", "started_total", "TeX processes the pool started."),
		replaced:       d("tex_pool", "replaced_total", "TeX processes the pool replaced after use, death, hang or idle timeout."),
		failures:       d("tex_pool", "failures_total", "TeX processes that failed to start or warm up."),
		jobsByState:    d("", "jobs", "Jobs in the job table, by state.", "state"),
		oldestQueued:   d("jobs", "oldest_queued_age_seconds", "Age of the oldest queued job, 0 when none is queued."),
		memoryUsed:     d("memory", "used_bytes", "Memory used by the service's cgroup (outprint and its TeX processes), else by the machine."),
		memoryLimit:    d("memory", "limit_bytes", "Memory limit of the service's cgroup, else the machine's memory."),
		readyDesc:      d("", "ready", "1 when the service can render (the check behind /readyz passes), else 0."),
		workerReady:    d("gateway", "worker_ready", "1 when the worker answered its last /readyz probe ready, else 0 (gateways only).", "worker"),
		zygotes:        d("tex_pool", "zygotes", "Zygotes ready to fork warm TeX processes."),
		zygoteForks:    d("tex_pool", "zygote_forks_total", "Warm TeX processes forked from a zygote (no warm-up of their own)."),
		zygoteRetired:  d("tex_pool", "zygotes_retired_total", "Zygotes replaced after their fork count, lifetime, a crashed child, death or idleness."),
		zygoteOn:       d("tex_pool", "zygote_enabled", "1 when warm TeX processes are forked from zygotes, 0 when each warms up by itself (fallback)."),
		officeRSS:      d("office", "process_rss_bytes", "Resident memory of each warm LibreOffice process, by slot.", "slot"),
		officeRestarts: d("office", "restarts_total", "LibreOffice processes replaced, by cause: timeout, cancel, crash, conversions (its count reached), memory (its budget passed).", "cause"),
	}
}

func (s *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		s.running, s.queued, s.slots, s.queueDepth,
		s.warm, s.busy, s.warming, s.started, s.replaced, s.failures,
		s.jobsByState, s.oldestQueued, s.memoryUsed, s.memoryLimit, s.readyDesc, s.workerReady,
		s.zygotes, s.zygoteForks, s.zygoteRetired, s.zygoteOn, s.officeRSS, s.officeRestarts,
	} {
		ch <- d
	}
}

func (s *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	if f := s.admission.Load(); f != nil {
		a := (*f)()
		gauge(s.running, float64(a.Running))
		gauge(s.queued, float64(a.Queued))
		gauge(s.slots, float64(a.Slots))
		gauge(s.queueDepth, float64(a.QueueDepth))
	}
	if f := s.pool.Load(); f != nil {
		p := (*f)()
		gauge(s.warm, float64(p.Warm))
		gauge(s.busy, float64(p.Busy))
		gauge(s.warming, float64(p.Warming))
		counter(s.started, p.Started)
		counter(s.replaced, p.Replaced)
		counter(s.failures, p.Failures)
		gauge(s.zygotes, float64(p.Zygotes))
		counter(s.zygoteForks, p.ZygoteForks)
		counter(s.zygoteRetired, p.ZygotesRetired)
		on := 0.0
		if p.Zygote {
			on = 1
		}
		gauge(s.zygoteOn, on)
	}
	if f := s.jobs.Load(); f != nil {
		j := (*f)()
		gauge(s.jobsByState, float64(j.Queued), "queued")
		gauge(s.jobsByState, float64(j.Running), "running")
		gauge(s.jobsByState, float64(j.Succeeded), "succeeded")
		gauge(s.jobsByState, float64(j.Failed), "failed")
		gauge(s.jobsByState, float64(j.Cancelled), "cancelled")
		gauge(s.oldestQueued, j.OldestQueued.Seconds())
	}
	if f := s.ready.Load(); f != nil {
		v := 0.0
		if (*f)() {
			v = 1
		}
		gauge(s.readyDesc, v)
	}
	if f := s.workers.Load(); f != nil {
		for _, w := range (*f)() {
			v := 0.0
			if w.Ready {
				v = 1
			}
			gauge(s.workerReady, v, w.Worker)
		}
	}
	if f := s.office.Load(); f != nil {
		o := (*f)()
		for i, rss := range o.RSS {
			gauge(s.officeRSS, float64(rss), strconv.Itoa(i))
		}
		for cause, n := range o.Restarts {
			ch <- prometheus.MustNewConstMetric(s.officeRestarts, prometheus.CounterValue, float64(n), cause)
		}
	}
	if f := s.memory.Load(); f != nil {
		mem := (*f)()
		if mem.Used > 0 {
			gauge(s.memoryUsed, float64(mem.Used))
		}
		if mem.Limit > 0 {
			gauge(s.memoryLimit, float64(mem.Limit))
		}
	}
}
