package metrics

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func TestSourcesAbsentUntilSet(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	New(reg)
	got := gather(t, reg)
	for _, name := range []string{
		"outprint_admission_running", "outprint_admission_queued",
		"outprint_tex_pool_warm", "outprint_jobs", "outprint_jobs_oldest_queued_age_seconds",
		"outprint_memory_used_bytes", "outprint_memory_limit_bytes", "outprint_ready",
	} {
		if _, ok := got[name]; ok {
			t.Errorf("%s reported before its source was set", name)
		}
	}
	// Event metrics exist from the start, refusals with both codes at 0.
	for _, name := range []string{"outprint_admission_refusals_total", "outprint_render_peak_memory_bytes",
		"outprint_admission_queue_wait_seconds", "outprint_job_queue_delay_seconds", "outprint_job_retries_total",
		"outprint_job_accepted_total", "outprint_job_finished_total"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s missing from a fresh registry", name)
		}
	}
}

func TestSources(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	adm := AdmissionStats{Slots: 2, QueueDepth: 4, Running: 2, Queued: 3}
	m.SetAdmissionSource(func() AdmissionStats { return adm })
	m.SetPoolSource(func() PoolStats {
		return PoolStats{Warm: 1, Busy: 2, Warming: 1, Started: 10, Replaced: 7, Failures: 1, Zygotes: 2, ZygoteForks: 40, ZygotesRetired: 1, Zygote: true}
	})
	m.SetJobSource(func() JobStats {
		return JobStats{Queued: 5, Running: 1, Succeeded: 20, Failed: 2, Cancelled: 3, OldestQueued: 90 * time.Second}
	})
	want := `
# HELP outprint_admission_queue_depth Configured admission queue depth (admission.queueDepth).
# TYPE outprint_admission_queue_depth gauge
outprint_admission_queue_depth 4
# HELP outprint_admission_queued Render requests waiting in the admission queue.
# TYPE outprint_admission_queued gauge
outprint_admission_queued 3
# HELP outprint_admission_running Renders holding an admission slot.
# TYPE outprint_admission_running gauge
outprint_admission_running 2
# HELP outprint_admission_slots Configured admission slots (admission.slots).
# TYPE outprint_admission_slots gauge
outprint_admission_slots 2
# HELP outprint_jobs Jobs in the job table, by state.
# TYPE outprint_jobs gauge
outprint_jobs{state="cancelled"} 3
outprint_jobs{state="failed"} 2
outprint_jobs{state="queued"} 5
outprint_jobs{state="running"} 1
outprint_jobs{state="succeeded"} 20
# HELP outprint_jobs_oldest_queued_age_seconds Age of the oldest queued job, 0 when none is queued.
# TYPE outprint_jobs_oldest_queued_age_seconds gauge
outprint_jobs_oldest_queued_age_seconds 90
# HELP outprint_tex_pool_busy TeX processes typesetting a document.
# TYPE outprint_tex_pool_busy gauge
outprint_tex_pool_busy 2
# HELP outprint_tex_pool_failures_total TeX processes that failed to start or warm up.
# TYPE outprint_tex_pool_failures_total counter
outprint_tex_pool_failures_total 1
# HELP outprint_tex_pool_replaced_total TeX processes the pool replaced after use, death, hang or idle timeout.
# TYPE outprint_tex_pool_replaced_total counter
outprint_tex_pool_replaced_total 7
# HELP outprint_tex_pool_started_total TeX processes the pool started.
# TYPE outprint_tex_pool_started_total counter
outprint_tex_pool_started_total 10
# HELP outprint_tex_pool_warm Warm TeX processes idle and ready for a document.
# TYPE outprint_tex_pool_warm gauge
outprint_tex_pool_warm 1
# HELP outprint_tex_pool_warming TeX processes starting up: loading the format and fonts before they can take a document.
# TYPE outprint_tex_pool_warming gauge
outprint_tex_pool_warming 1
# HELP outprint_tex_pool_zygote_enabled 1 when warm TeX processes are forked from zygotes, 0 when each warms up by itself (fallback).
# TYPE outprint_tex_pool_zygote_enabled gauge
outprint_tex_pool_zygote_enabled 1
# HELP outprint_tex_pool_zygote_forks_total Warm TeX processes forked from a zygote (no warm-up of their own).
# TYPE outprint_tex_pool_zygote_forks_total counter
outprint_tex_pool_zygote_forks_total 40
# HELP outprint_tex_pool_zygotes Zygotes ready to fork warm TeX processes.
# TYPE outprint_tex_pool_zygotes gauge
outprint_tex_pool_zygotes 2
# HELP outprint_tex_pool_zygotes_retired_total Zygotes replaced after their fork count, lifetime, a crashed child, death or idleness.
# TYPE outprint_tex_pool_zygotes_retired_total counter
outprint_tex_pool_zygotes_retired_total 1
`
	names := []string{
		"outprint_admission_queue_depth", "outprint_admission_queued", "outprint_admission_running", "outprint_admission_slots",
		"outprint_jobs", "outprint_jobs_oldest_queued_age_seconds",
		"outprint_tex_pool_busy", "outprint_tex_pool_failures_total", "outprint_tex_pool_replaced_total",
		"outprint_tex_pool_started_total", "outprint_tex_pool_warm", "outprint_tex_pool_warming",
		"outprint_tex_pool_zygote_enabled", "outprint_tex_pool_zygote_forks_total", "outprint_tex_pool_zygotes",
		"outprint_tex_pool_zygotes_retired_total",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// The source is read at every scrape, not copied once.
	adm.Running, adm.Queued = 0, 0
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP outprint_admission_running Renders holding an admission slot.
# TYPE outprint_admission_running gauge
outprint_admission_running 0
`), "outprint_admission_running"); err != nil {
		t.Errorf("after the state changed: %v", err)
	}
}

func TestMemoryAndReadySources(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	mem := MemoryStats{Used: 3 << 30, Limit: 4 << 30}
	ready := true
	m.SetMemorySource(func() MemoryStats { return mem })
	m.SetReadySource(func() bool { return ready })
	names := []string{"outprint_memory_used_bytes", "outprint_memory_limit_bytes", "outprint_ready"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP outprint_memory_limit_bytes Memory limit of the service's cgroup, else the machine's memory.
# TYPE outprint_memory_limit_bytes gauge
outprint_memory_limit_bytes 4.294967296e+09
# HELP outprint_memory_used_bytes Memory used by the service's cgroup (outprint and its TeX processes), else by the machine.
# TYPE outprint_memory_used_bytes gauge
outprint_memory_used_bytes 3.221225472e+09
# HELP outprint_ready 1 when the service can render (the check behind /readyz passes), else 0.
# TYPE outprint_ready gauge
outprint_ready 1
`), names...); err != nil {
		t.Error(err)
	}
	// An unreadable figure is left out rather than reported as 0 (a 0
	// limit would make used/limit infinite); not ready is 0.
	mem, ready = MemoryStats{Used: 5}, false
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP outprint_memory_used_bytes Memory used by the service's cgroup (outprint and its TeX processes), else by the machine.
# TYPE outprint_memory_used_bytes gauge
outprint_memory_used_bytes 5
# HELP outprint_ready 1 when the service can render (the check behind /readyz passes), else 0.
# TYPE outprint_ready gauge
outprint_ready 0
`), names...); err != nil {
		t.Error(err)
	}
}

func TestRequestsAndJobCounts(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	m.ObserveRequest("/healthz", 200, 50*time.Microsecond)
	m.ObserveRequest("/healthz", 200, 2*time.Millisecond)
	m.ObserveRequest(OtherRoute, 404, time.Millisecond)
	m.JobAccepted()
	m.JobAccepted()
	m.JobFinished("succeeded", "")
	got := gather(t, reg)
	counts := map[string]uint64{}
	for _, mt := range got["outprint_http_request_duration_seconds"].GetMetric() {
		var route, code string
		for _, lp := range mt.GetLabel() {
			switch lp.GetName() {
			case "route":
				route = lp.GetValue()
			case "code":
				code = lp.GetValue()
			}
		}
		counts[route+" "+code] = mt.GetHistogram().GetSampleCount()
		if route == "/healthz" {
			// The first bucket is below a millisecond: /healthz answers
			// in microseconds.
			if b := mt.GetHistogram().GetBucket()[0]; b.GetUpperBound() > 0.0001 || b.GetCumulativeCount() != 1 {
				t.Errorf("/healthz first bucket = le %v count %d, want le <= 0.0001 holding the 50 µs answer", b.GetUpperBound(), b.GetCumulativeCount())
			}
		}
	}
	if counts["/healthz 200"] != 2 || counts["other 404"] != 1 || len(counts) != 2 {
		t.Errorf("request counts = %v, want /healthz 200: 2 and other 404: 1", counts)
	}
	if v := testutil.ToFloat64(m.jobAccepted); v != 2 {
		t.Errorf("jobs accepted = %v, want 2", v)
	}
	for state, want := range map[string]float64{"succeeded": 1, "failed": 0, "cancelled": 0} {
		if v := testutil.ToFloat64(m.jobFinished.WithLabelValues(state)); v != want {
			t.Errorf("jobs finished{state=%q} = %v, want %v", state, v, want)
		}
	}
}

func TestEvents(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	m.Refused("busy")
	m.Refused("busy")
	m.Refused("user_limit")
	for _, tc := range []struct {
		code string
		want float64
	}{{"busy", 2}, {"user_limit", 1}} {
		if got := testutil.ToFloat64(m.refusals.WithLabelValues(tc.code)); got != tc.want {
			t.Errorf("refusals{code=%q} = %v, want %v", tc.code, got, tc.want)
		}
	}

	m.ObserveRender(2*time.Second, "ok")
	m.ObserveRender(500*time.Millisecond, "ok")
	m.ObserveRender(time.Minute, "timeout")
	m.ObserveQueueWait(0)
	m.ObserveQueueWait(3 * time.Second)
	m.ObserveJobQueueDelay(10 * time.Second)
	m.JobFailed("tex")
	m.JobFailed("tex")
	m.JobFailed("timeout")
	m.JobRetried()

	got := gather(t, reg)
	hist := func(name, label, value string) *dto.Histogram {
		t.Helper()
		mf, ok := got[name]
		if !ok {
			t.Fatalf("%s not gathered", name)
		}
		for _, mt := range mf.GetMetric() {
			if label == "" {
				return mt.GetHistogram()
			}
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return mt.GetHistogram()
				}
			}
		}
		t.Fatalf("%s{%s=%q} not gathered", name, label, value)
		return nil
	}
	for _, tc := range []struct {
		name, label, value string
		count              uint64
		sum                float64
	}{
		{"outprint_render_duration_seconds", "result", "ok", 2, 2.5},
		{"outprint_render_duration_seconds", "result", "timeout", 1, 60},
		{"outprint_admission_queue_wait_seconds", "", "", 2, 3},
		{"outprint_job_queue_delay_seconds", "", "", 1, 10},
	} {
		h := hist(tc.name, tc.label, tc.value)
		if h.GetSampleCount() != tc.count || h.GetSampleSum() != tc.sum {
			t.Errorf("%s{%s=%q} count, sum = %d, %v, want %d, %v", tc.name, tc.label, tc.value,
				h.GetSampleCount(), h.GetSampleSum(), tc.count, tc.sum)
		}
	}
	if got := testutil.ToFloat64(m.jobFailures.WithLabelValues("tex")); got != 2 {
		t.Errorf("job failures{code=tex} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.jobRetries); got != 1 {
		t.Errorf("job retries = %v, want 1", got)
	}
}

// The peak memory gauge keeps the largest value, also under concurrent
// observers.
func TestPeakMemory(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				m.ObserveRenderMemory(int64(g*1000 + i))
			}
		})
	}
	wg.Wait()
	m.ObserveRenderMemory(5)
	mf := gather(t, reg)["outprint_render_peak_memory_bytes"]
	if got := mf.GetMetric()[0].GetGauge().GetValue(); got != 7999 {
		t.Errorf("peak memory = %v, want 7999", got)
	}
}

// Each Metrics lives on its own registry: two in one process do not
// collide, and registering twice on one registry is caught at startup.
func TestNoGlobals(t *testing.T) {
	a, b := New(prometheus.NewRegistry()), New(prometheus.NewRegistry())
	a.Refused("busy")
	if got := testutil.ToFloat64(b.refusals.WithLabelValues("busy")); got != 0 {
		t.Errorf("second registry's refusals = %v, want 0", got)
	}
	reg := prometheus.NewRegistry()
	New(reg)
	defer func() {
		if recover() == nil {
			t.Error("New on a registry that already holds outprint's metrics did not panic")
		}
	}()
	New(reg)
}

func TestNilMetricsRecordsNothing(t *testing.T) {
	var m *Metrics
	m.Refused("busy")
	m.ObserveRender(time.Second, "ok")
	m.ObserveQueueWait(time.Second)
	m.ObserveRenderMemory(1)
	m.ObserveJobQueueDelay(time.Second)
	m.JobFailed("tex")
	m.JobRetried()
	m.SetAdmissionSource(func() AdmissionStats { return AdmissionStats{} })
	m.SetPoolSource(func() PoolStats { return PoolStats{} })
	m.SetJobSource(func() JobStats { return JobStats{} })
	m.SetMemorySource(func() MemoryStats { return MemoryStats{} })
	m.SetReadySource(func() bool { return true })
	m.SetWorkerSource(func() []WorkerStatus { return []WorkerStatus{{Worker: "http://10.0.0.1:8090", Ready: true}} })
	m.ObserveRequest("/healthz", 200, time.Millisecond)
	m.JobAccepted()
	m.JobFinished("failed", "tex")
	m.KnownOffice([]string{"docx"}, []string{"ok"})
	m.ObserveConversion("docx", "ok", time.Second)
	m.ObserveConversionQueue(time.Second)
	m.SetOfficeSource(func() OfficeStats { return OfficeStats{} })
	m.KnownDiagrams([]string{"mermaid"}, []string{"drawn"}, []string{"worn"})
	m.DiagramDrawn("mermaid", "drawn")
	m.ObserveDiagramDraw("mermaid", time.Second)
	m.BrowserRetired("worn")
}

// TestDiagrams: the diagram series exist at 0 for the known labels and
// count what they are told.
func TestDiagrams(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	m.KnownDiagrams([]string{"mermaid", "graphviz"}, []string{"drawn", "invalid"}, []string{"worn", "crashed"})
	for _, tc := range []struct {
		c    prometheus.Collector
		want float64
	}{
		{m.diagrams.WithLabelValues("graphviz", "invalid"), 0},
		{m.browsersEnded.WithLabelValues("crashed"), 0},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("known series = %v, want %v", got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(m.diagrams); n != 4 {
		t.Errorf("outprint_diagram_diagrams_total has %d series after KnownDiagrams, want 4 (2 engines × 2 outcomes)", n)
	}
	m.DiagramDrawn("mermaid", "drawn")
	m.DiagramDrawn("mermaid", "drawn")
	m.ObserveDiagramDraw("mermaid", 300*time.Millisecond)
	m.BrowserRetired("crashed")
	if got := testutil.ToFloat64(m.diagrams.WithLabelValues("mermaid", "drawn")); got != 2 {
		t.Errorf("diagrams{mermaid,drawn} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.browsersEnded.WithLabelValues("crashed")); got != 1 {
		t.Errorf("browser restarts{crashed} = %v, want 1", got)
	}
	h := gather(t, reg)["outprint_diagram_draw_duration_seconds"]
	var count uint64
	for _, mt := range h.GetMetric() {
		count += mt.GetHistogram().GetSampleCount()
	}
	if count != 1 {
		t.Errorf("outprint_diagram_draw_duration_seconds has %d samples, want 1", count)
	}
}

// Every metric passes Prometheus' own naming and help lint.
func TestLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	m.SetAdmissionSource(func() AdmissionStats { return AdmissionStats{} })
	m.SetPoolSource(func() PoolStats { return PoolStats{} })
	m.SetJobSource(func() JobStats { return JobStats{} })
	m.SetMemorySource(func() MemoryStats { return MemoryStats{Used: 1, Limit: 2} })
	m.SetReadySource(func() bool { return true })
	m.SetWorkerSource(func() []WorkerStatus { return []WorkerStatus{{Worker: "http://10.0.0.1:8090"}} })
	m.ObserveRender(time.Second, "ok")
	m.ObserveRequest("/healthz", 200, time.Millisecond)
	m.JobFailed("tex")
	problems, err := promlint.NewWithMetricFamilies(mustGather(t, reg)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func mustGather(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// A gateway reports each worker's readiness; a worker that stops being
// listed (its address no longer resolves) leaves the scrape.
func TestWorkerReady(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	workers := []WorkerStatus{{Worker: "http://10.0.0.1:8090", Ready: true}, {Worker: "http://10.0.0.2:8090"}}
	m.SetWorkerSource(func() []WorkerStatus { return workers })
	const head = `# HELP outprint_gateway_worker_ready 1 when the worker answered its last /readyz probe ready, else 0 (gateways only).
# TYPE outprint_gateway_worker_ready gauge
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(head+`outprint_gateway_worker_ready{worker="http://10.0.0.1:8090"} 1
outprint_gateway_worker_ready{worker="http://10.0.0.2:8090"} 0
`), "outprint_gateway_worker_ready"); err != nil {
		t.Error(err)
	}
	workers = workers[1:]
	if err := testutil.GatherAndCompare(reg, strings.NewReader(head+`outprint_gateway_worker_ready{worker="http://10.0.0.2:8090"} 0
`), "outprint_gateway_worker_ready"); err != nil {
		t.Error(err)
	}
}

// TestOffice: conversions count by format and result, their duration is
// timed only when they ran, the known series exist at 0 from the start,
// and the LibreOffice source reports memory by slot and restarts by cause
// once it is set.
func TestOffice(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg)
	if _, ok := gather(t, reg)["outprint_office_restarts_total"]; ok {
		t.Error("outprint_office_restarts_total reported before its source was set")
	}
	m.KnownOffice([]string{"docx", "xlsx"}, []string{"ok"})
	if got := testutil.ToFloat64(m.conversions.WithLabelValues("xlsx", "ok")); got != 0 {
		t.Errorf("conversions{xlsx,ok} after KnownOffice = %v, want 0", got)
	}
	m.ObserveConversion("docx", "ok", 2*time.Second)
	m.ObserveConversion("docx", "busy", 0)
	m.ObserveConversionQueue(time.Second)
	for _, tc := range []struct {
		format, result string
		want           float64
	}{{"docx", "ok", 1}, {"docx", "busy", 1}, {"xlsx", "ok", 0}} {
		if got := testutil.ToFloat64(m.conversions.WithLabelValues(tc.format, tc.result)); got != tc.want {
			t.Errorf("conversions{%s,%s} = %v, want %v", tc.format, tc.result, got, tc.want)
		}
	}
	fams := gather(t, reg)
	for _, mt := range fams["outprint_office_conversion_duration_seconds"].GetMetric() {
		if mt.GetLabel()[0].GetValue() == "docx" && mt.GetHistogram().GetSampleCount() != 1 {
			t.Errorf("docx duration samples = %d, want 1 (the refused one is not timed)", mt.GetHistogram().GetSampleCount())
		}
	}
	if n := fams["outprint_office_queue_delay_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("queue delay samples = %d, want 1", n)
	}
	m.SetOfficeSource(func() OfficeStats {
		return OfficeStats{RSS: []int64{100, 200}, Restarts: map[string]uint64{"crash": 2, "memory": 0}}
	})
	fams = gather(t, reg)
	if got := len(fams["outprint_office_process_rss_bytes"].GetMetric()); got != 2 {
		t.Errorf("process_rss_bytes series = %d, want one per slot (2)", got)
	}
	restarts := map[string]float64{}
	for _, mt := range fams["outprint_office_restarts_total"].GetMetric() {
		restarts[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
	}
	if restarts["crash"] != 2 || len(restarts) != 2 {
		t.Errorf("restarts = %v, want crash 2 and memory 0", restarts)
	}
}
