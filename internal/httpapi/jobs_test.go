package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/fetch"
	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/outline/outlinetest"
	"github.com/outprint/outprint/internal/raster"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/store"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/web"
	"github.com/outprint/outprint/internal/worker"
)

// The job tests run the real server on a loopback port, the real job
// service (River) on a real SQLite file and on a real PostgreSQL database
// made for the test, the real artifact store, and the real render pipeline
// with real XeLaTeX behind the job workers. Renders can be held at chosen
// points (hookRenderer) so that states and progress phases are observed
// without depending on how fast TeX is.

// dbKinds are the two databases every job test runs on.
var dbKinds = []string{"sqlite", "postgres"}

// jobsDatabase returns the URL of a fresh database of kind, dropped when
// the test ends.
func jobsDatabase(t *testing.T, kind string) string {
	t.Helper()
	if kind == "sqlite" {
		return "sqlite://" + filepath.Join(t.TempDir(), "outprint.db")
	}
	return testenv.PostgresDatabase(t, "outprint_httpapi")
}

// jobsOptions shape one job test server.
type jobsOptions struct {
	kind string
	// ttl is jobs.ttl (default 1 h).
	ttl time.Duration
	// maxPages is the page limit (default that of SPEC §3).
	maxPages  int
	admission admission.Config
	// hooks, when set, wraps the Render stage of every job and sync
	// render.
	hooks *hookRenderer
	// outline puts a fake Outline behind the server.
	outline bool
	// configure, when set, adjusts the server's Config last.
	configure func(e *jobsEnv, cfg *Config)
	// web serves the page and the thumbnails; heartbeat and maxStreams
	// set the event streams' Config (0: the defaults).
	web        bool
	heartbeat  time.Duration
	maxStreams int
	// webhooks and callbacks, when set, deliver and accept job callbacks
	// (webhook_test.go).
	webhooks  *jobs.WebhookConfig
	callbacks Callbacks
	// checkBudget is worker.Config.CheckBudget (0: the default).
	checkBudget time.Duration
	// maxQueued and maxStored are the tenant quotas (0: the defaults).
	maxQueued int
	maxStored int64
	// previewSlots is worker.Config.PreviewSlots (0: the default).
	previewSlots int
	// coldTeX typesets on a cold tex.Runner of the job's own, working
	// below texDir, instead of the shared pool: for the tests that look
	// for TeX's processes there.
	coldTeX bool
	// office converts Office documents, synchronously and as jobs; nil:
	// none. timeout is the render timeout, and a minute more each job
	// attempt's (0: the defaults).
	office  worker.Converter
	timeout time.Duration
}

// jobsEnv is a server with the job routes.
type jobsEnv struct {
	t      *testing.T
	url    string
	adm    *admission.Controller
	svc    *jobs.Service
	dataDB string // the database URL
	store  string // the artifact store's root
	texDir string // the pipeline's scratch; with coldTeX, TeX's processes work below it too
	fake   *outlinetest.Server
	// clock is the job service's: tests move it past a TTL.
	clock *testenv.Clock
}

// Keys of the job tests: two users of tenant acme and one of another
// tenant.
const (
	keyAlice = "key-alice"
	keyBob   = "key-bob"
	keyOscar = "key-oscar"
)

func newJobsEnv(t *testing.T, o jobsOptions) *jobsEnv {
	t.Helper()
	testenv.Require(t, "xelatex", "rsvg-convert", "pdfinfo", "pdftotext")
	e := &jobsEnv{t: t, texDir: t.TempDir(), store: t.TempDir(), clock: &testenv.Clock{}}
	var engine render.Engine = testEngine(t)
	if o.coldTeX {
		runner, err := tex.NewRunner(tex.RunnerConfig{TempDir: e.texDir})
		if err != nil {
			t.Fatalf("tex.NewRunner: %v", err)
		}
		engine = runner
	}
	pl := render.New(render.Config{Engine: engine, Limits: limits.Render{MaxPages: o.maxPages, Timeout: o.timeout}, TempDir: e.texDir})
	var r Renderer = pl
	if o.hooks != nil {
		o.hooks.next = pl
		r = o.hooks
	}

	ac := o.admission
	if ac.Slots == 0 {
		ac = admission.Config{Slots: 1, QueueDepth: 4, PerUser: 1, MaxWait: time.Minute}
	}
	e.adm = mustAdmission(t, ac)

	ctx := context.Background()
	e.dataDB = jobsDatabase(t, o.kind)
	db, err := jobs.Open(ctx, e.dataDB)
	if err != nil {
		t.Fatalf("jobs.Open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := jobs.Migrate(ctx, db); err != nil {
		t.Fatalf("jobs.Migrate: %v", err)
	}
	st, err := store.NewFS(e.store)
	if err != nil {
		t.Fatal(err)
	}
	ttl := o.ttl
	if ttl == 0 {
		ttl = time.Hour
	}
	filler, err := forms.New(forms.Config{}, engine)
	if err != nil {
		t.Fatal(err)
	}
	jobTimeout := time.Duration(0) // the default
	if o.timeout > 0 {
		jobTimeout = o.timeout + time.Minute
	}
	e.svc, err = jobs.New(db, st, worker.NewJobs(worker.JobsConfig{Pipeline: pl, Renderer: r, Forms: filler, Office: o.office}), jobs.Config{
		TTL:               ttl,
		JobTimeout:        jobTimeout,
		Clock:             e.clock,
		MaxWorkers:        ac.Slots,
		Budget:            worker.NewBudget(e.adm),
		MaxAttempts:       3,
		RetryBase:         20 * time.Millisecond,
		RetryMax:          100 * time.Millisecond,
		SweepInterval:     time.Hour,
		CancelPoll:        100 * time.Millisecond,
		ProgressInterval:  100 * time.Millisecond,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 100 * time.Millisecond,
		Logger:            quietJobLogger(),
		Webhooks:          webhookConfig(o.webhooks),

		MaxQueuedPerTenant:      o.maxQueued,
		MaxStoredBytesPerTenant: o.maxStored,
	})
	if err != nil {
		t.Fatalf("jobs.New: %v", err)
	}
	if err := e.svc.Start(ctx); err != nil {
		t.Fatalf("jobs Start: %v", err)
	}
	// Registered after db.Close, so it runs before it.
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := e.svc.Stop(sctx); err != nil {
			t.Errorf("jobs Stop: %v", err)
		}
	})

	cfg := Config{
		Capacity: mustCapacity(t, worker.Config{Pipeline: pl, Renderer: r, Admission: e.adm, CheckBudget: o.checkBudget,
			PreviewSlots: o.previewSlots}),
		Auth:      olKeys{keyAlice: {"alice", "acme"}, keyBob: {"bob", "acme"}, keyOscar: {"oscar", "other"}},
		Jobs:      e.svc,
		Forms:     filler,
		Office:    o.office,
		Logger:    quietJobLogger(),
		Callbacks: o.callbacks,
	}
	cfg.EventPoll, cfg.EventHeartbeat, cfg.MaxEventStreams = 20*time.Millisecond, o.heartbeat, o.maxStreams
	if o.web {
		site, err := web.New()
		if err != nil {
			t.Fatal(err)
		}
		testenv.Require(t, "pdftoppm")
		rz, err := raster.New(raster.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Web, cfg.Raster = site, rz
	}
	if o.outline {
		e.fake = outlinetest.New(t)
		cfg.Outline = outline.NewClient(e.fake.URL(), fetch.New(e.fake.FetchConfig()))
	}
	if o.configure != nil {
		o.configure(e, &cfg)
	}
	hs := httptest.NewServer(mustServer(t, cfg).Handler())
	t.Cleanup(hs.Close)
	e.url = hs.URL
	return e
}

// quietJobLogger discards logs unless OUTPRINT_TEST_LOG is set.
func quietJobLogger() *slog.Logger {
	var w io.Writer = io.Discard
	if os.Getenv("OUTPRINT_TEST_LOG") != "" {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// request is one call of a job route.
type request struct {
	method, path string
	key          string // API key; "" sends no Authorization header
	cookie       string // Outline accessToken; "" sends none
	ctype        string
	body         []byte
	header       map[string]string
}

func (e *jobsEnv) do(r request) answer {
	e.t.Helper()
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, e.url+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if r.ctype != "" {
		req.Header.Set("Content-Type", r.ctype)
	}
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	if r.cookie != "" {
		req.AddCookie(&http.Cookie{Name: outline.CookieName, Value: r.cookie})
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
		if k == "Host" {
			req.Host = v // the client's Host header, forged in tests
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := do(ctx, req)
	if a.err != nil {
		e.t.Fatalf("%s %s: %v", r.method, r.path, a.err)
	}
	return a
}

// jsonBody is a POST /v1/jobs with a JSON body.
func jsonBody(key string, v any, header map[string]string) request {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return request{method: http.MethodPost, path: "/v1/jobs", key: key, ctype: "application/json", body: b, header: header}
}

// multipartBody is a POST /v1/jobs with a document part and asset parts.
func multipartBody(key, document string, header map[string]string, assets ...asset) request {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	part := func(name, filename string) io.Writer {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, name, filename))
		w, err := mw.CreatePart(h)
		if err != nil {
			panic(err)
		}
		return w
	}
	// The parts go to a bytes.Buffer: the writes cannot fail.
	_, _ = part("document", "report.md").Write([]byte(document))
	for _, a := range assets {
		_, _ = part("asset", a.name).Write(a.data)
	}
	_ = mw.Close()
	return request{method: http.MethodPost, path: "/v1/jobs", key: key, ctype: mw.FormDataContentType(), body: buf.Bytes(), header: header}
}

// view decodes a job answer with the wanted status.
func (a answer) view(t *testing.T, status int) jobs.View {
	t.Helper()
	if a.status != status {
		t.Fatalf("status = %d, want %d; body %s", a.status, status, a.body)
	}
	var v jobs.View
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("job answer is not a job: %v\n%s", err, a.body)
	}
	if v.ID == "" || v.Links.Self != "/v1/jobs/"+v.ID || v.Links.Result != "/v1/jobs/"+v.ID+"/result" {
		t.Fatalf("job answer = %s, want an id and its links", a.body)
	}
	return v
}

// as makes r a request of who: an API key, or an Outline reader's
// accessToken (the fake Outline's tokens start with "tok.").
func as(r request, who string) request {
	if strings.HasPrefix(who, "tok.") {
		r.key, r.cookie = "", who
	} else {
		r.key, r.cookie = who, ""
	}
	return r
}

// get fetches a job as who (see as).
func (e *jobsEnv) get(who, id string) jobs.View {
	e.t.Helper()
	return e.do(as(request{method: http.MethodGet, path: "/v1/jobs/" + id}, who)).view(e.t, http.StatusOK)
}

// wait polls the job until cond holds. The bound only stops a broken test
// from hanging; nothing is asserted about time.
func (e *jobsEnv) wait(key, id, what string, cond func(jobs.View) bool) jobs.View {
	e.t.Helper()
	var v jobs.View
	testenv.Eventually(e.t, "job "+id+" to get "+what, func() bool {
		v = e.get(key, id)
		return cond(v)
	})
	return v
}

func (e *jobsEnv) waitState(key, id, state string) jobs.View {
	e.t.Helper()
	return e.wait(key, id, state, func(v jobs.View) bool { return v.State == state || (state != v.State && isTerminal(v.State)) })
}

func isTerminal(state string) bool {
	return state == jobs.StateSucceeded || state == jobs.StateFailed || state == jobs.StateCancelled
}

func phase(v jobs.View) string {
	if v.Progress.Phase == nil {
		return ""
	}
	return *v.Progress.Phase
}

// step is a point where a render waits until the test lets it go on.
type step struct {
	once    sync.Once
	reached chan struct{}
	release chan struct{}
	rel     sync.Once
}

func newStep() *step { return &step{reached: make(chan struct{}), release: make(chan struct{})} }

// wait marks the step reached (the first time) and holds until release or
// ctx ends.
func (s *step) wait(ctx context.Context) error {
	s.once.Do(func() { close(s.reached) })
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *step) open() { s.rel.Do(func() { close(s.release) }) }

// await waits until the step is reached.
func (s *step) await(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.reached:
	case <-time.After(2 * time.Minute):
		t.Fatalf("never reached %s", what)
	}
}

// hookRenderer wraps the Render stage: before runs ahead of it, progress
// after each progress report, after once it returned a PDF. Any of them
// may hold the render.
type hookRenderer struct {
	next     Renderer
	before   func(ctx context.Context) error
	progress func(ctx context.Context, p render.Progress)
	after    func(ctx context.Context)
}

func (h *hookRenderer) Render(ctx context.Context, pr *render.Prepared, progress func(render.Progress)) (*render.Result, error) {
	if h.before != nil {
		if err := h.before(ctx); err != nil {
			return nil, err
		}
	}
	res, err := h.next.Render(ctx, pr, func(p render.Progress) {
		if progress != nil {
			progress(p)
		}
		if h.progress != nil {
			h.progress(ctx, p)
		}
	})
	if err == nil && h.after != nil {
		h.after(ctx)
	}
	return res, err
}

// longDoc is a document of about pages pages of plain text.
func longDoc(title string, pages int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", title)
	para := strings.Repeat("The quarterly figures were checked twice and agree with the ledger. ", 8)
	for i := range pages * 6 {
		fmt.Fprintf(&b, "%d. %s\n\n", i+1, para)
	}
	return b.String()
}

// pages returns pdfinfo's page count.
func pages(t *testing.T, pdf []byte) int {
	t.Helper()
	n, err := strconv.Atoi(pdfInfo(t, pdf, "Pages"))
	if err != nil {
		t.Fatalf("pdfinfo Pages: %v", err)
	}
	return n
}

// TestJobLifecycle follows one job from acceptance to download through
// every state and phase, with the idempotency, tenant and not-ready rules
// checked on the way.
func TestJobLifecycle(t *testing.T) {
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			before, page, after := newStep(), newStep(), newStep()
			hooks := &hookRenderer{
				before: before.wait,
				progress: func(ctx context.Context, p render.Progress) {
					if p.Phase == render.PhaseRendering && p.Pages >= 1 {
						_ = page.wait(ctx) // ctx ending ends the render: nothing to report
					}
				},
				after: func(ctx context.Context) { _ = after.wait(ctx) },
			}
			e := newJobsEnv(t, jobsOptions{kind: kind, hooks: hooks})
			defer before.open()
			defer page.open()
			defer after.open()

			doc := longDoc("Quarterly report", 2) + "\n![chart](img/chart.png)\n"
			chart := asset{"img/chart.png", pngImage(t, 40, 30)}
			idem := map[string]string{"Idempotency-Key": "report-2026-q1"}
			a := e.do(multipartBody(keyAlice, doc, idem, chart))
			v := a.view(t, http.StatusAccepted)
			if v.State != jobs.StateQueued || v.Attempts != 0 || v.Error != nil || v.StartedAt != nil {
				t.Errorf("accepted job = %s, want queued, no attempt, no error", a.body)
			}
			if loc := a.header.Get("Location"); loc != "/v1/jobs/"+v.ID {
				t.Errorf("Location = %q, want /v1/jobs/%s", loc, v.ID)
			}
			if cc := a.header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", cc)
			}
			id := v.ID

			// Running, held before the Render stage: phase preparing.
			before.await(t, "the render")
			v = e.wait(keyAlice, id, "running/preparing", func(v jobs.View) bool { return v.State == jobs.StateRunning })
			if phase(v) != jobs.PhasePreparing || v.Attempts != 1 || v.StartedAt == nil || v.FinishedAt != nil {
				t.Errorf("running job = %+v (phase %q), want phase preparing, attempt 1, startedAt set", v, phase(v))
			}
			res := e.do(request{method: http.MethodGet, path: "/v1/jobs/" + id + "/result", key: keyAlice})
			res.wantError(t, http.StatusConflict, CodeResultNotReady)
			res.retryAfter(t)

			// The same key and request: the original job, 200.
			a = e.do(multipartBody(keyAlice, doc, idem, chart))
			if again := a.view(t, http.StatusOK); again.ID != id {
				t.Errorf("repeated request = job %s, want the original %s", again.ID, id)
			}
			if loc := a.header.Get("Location"); loc != "/v1/jobs/"+id {
				t.Errorf("repeated request Location = %q, want /v1/jobs/%s", loc, id)
			}
			// The same key for another request: 409.
			e.do(multipartBody(keyAlice, doc+"\nOne more line.\n", idem, chart)).wantError(t, http.StatusConflict, CodeIdempotencyMismatch)
			e.do(multipartBody(keyAlice, doc, idem, asset{"img/chart.png", pngImage(t, 41, 30)})).
				wantError(t, http.StatusConflict, CodeIdempotencyMismatch)

			// Another tenant: the job does not exist for it.
			for _, r := range []request{
				{method: http.MethodGet, path: "/v1/jobs/" + id, key: keyOscar},
				{method: http.MethodGet, path: "/v1/jobs/" + id + "/result", key: keyOscar},
				{method: http.MethodDelete, path: "/v1/jobs/" + id, key: keyOscar},
			} {
				e.do(r).wantError(t, http.StatusNotFound, httperr.CodeNotFound)
			}
			// Keys are scoped to the tenant: the same key is a new job
			// there. It waits behind the held one and is cancelled while
			// queued.
			other := e.do(jsonBody(keyOscar, map[string]any{"markdown": "# Other tenant\n"}, idem)).view(t, http.StatusAccepted)
			if other.ID == id {
				t.Fatalf("another tenant's key named the same job %s", id)
			}
			c := e.do(request{method: http.MethodDelete, path: "/v1/jobs/" + other.ID, key: keyOscar}).view(t, http.StatusOK)
			if c.State != jobs.StateCancelled || c.FinishedAt == nil {
				t.Errorf("cancelled queued job = %+v, want cancelled with finishedAt", c)
			}

			// Rendering, held at the first page TeX shipped.
			before.open()
			page.await(t, "the first page")
			v = e.wait(keyAlice, id, "rendering with a page", func(v jobs.View) bool {
				return phase(v) == jobs.PhaseRendering && v.Progress.Pages >= 1
			})
			if v.State != jobs.StateRunning {
				t.Errorf("rendering job state = %s, want running", v.State)
			}
			page.open()

			// Packaging, held after TeX returned the PDF.
			after.await(t, "the end of the render")
			e.wait(keyAlice, id, "packaging", func(v jobs.View) bool { return phase(v) == jobs.PhasePackaging })
			after.open()

			v = e.waitState(keyAlice, id, jobs.StateSucceeded)
			if v.State != jobs.StateSucceeded || v.Error != nil || v.FinishedAt == nil || v.Progress.Phase != nil || v.Attempts != 1 {
				t.Fatalf("finished job = %+v, want succeeded after 1 attempt, no error, no phase", v)
			}
			res = e.do(request{method: http.MethodGet, path: "/v1/jobs/" + id + "/result", key: keyAlice})
			pdf := res.wantPDF(t)
			if n := pages(t, pdf); n < 2 || n != v.Progress.Pages {
				t.Errorf("PDF pages = %d, job pages %d; want the same, at least 2", n, v.Progress.Pages)
			}
			if got := pdfInfo(t, pdf, "Title"); got != "Quarterly report" {
				t.Errorf("PDF title = %q, want Quarterly report", got)
			}
			if cd := res.header.Get("Content-Disposition"); cd != `attachment; filename="Quarterly report.pdf"` {
				t.Errorf("Content-Disposition = %q", cd)
			}
			if txt := pdfText(t, pdf); !strings.Contains(txt, "agree with the ledger") {
				t.Errorf("PDF text lacks the document: %.200q", txt)
			}
			// Jobs belong to their user: the same tenant's other user
			// can neither read, download nor cancel the job (404, as for
			// another tenant); the list shows each caller their own jobs.
			for _, r := range []request{
				{method: http.MethodGet, path: "/v1/jobs/" + id, key: keyBob},
				{method: http.MethodGet, path: "/v1/jobs/" + id + "/result", key: keyBob},
				{method: http.MethodDelete, path: "/v1/jobs/" + id, key: keyBob},
			} {
				e.do(r).wantError(t, http.StatusNotFound, httperr.CodeNotFound)
			}
			if got := e.listIDs(keyAlice); !slices.Equal(got, []string{id}) {
				t.Errorf("alice's list = %v, want [%s]", got, id)
			}
			if got := e.listIDs(keyBob); len(got) != 0 {
				t.Errorf("bob's list = %v, want none", got)
			}
			if got := e.listIDs(keyOscar); !slices.Equal(got, []string{other.ID}) {
				t.Errorf("oscar's list = %v, want [%s]", got, other.ID)
			}
			// Cancelling a finished job changes nothing.
			if c := e.do(request{method: http.MethodDelete, path: "/v1/jobs/" + id, key: keyAlice}).view(t, http.StatusOK); c.State != jobs.StateSucceeded {
				t.Errorf("DELETE of a succeeded job = %s, want it still succeeded", c.State)
			}
			e.waitIdle()
		})
	}
}

// listIDs returns the ids GET /v1/jobs shows key's caller.
func (e *jobsEnv) listIDs(key string) []string {
	e.t.Helper()
	a := e.do(request{method: http.MethodGet, path: "/v1/jobs", key: key})
	if a.status != http.StatusOK {
		e.t.Fatalf("GET /v1/jobs = %d: %s", a.status, a.body)
	}
	var body struct {
		Jobs []jobs.View `json:"jobs"`
	}
	if err := json.Unmarshal(a.body, &body); err != nil {
		e.t.Fatalf("GET /v1/jobs body: %v\n%s", err, a.body)
	}
	ids := []string{}
	for _, j := range body.Jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

// waitIdle checks that every admission slot and count was given back.
func (e *jobsEnv) waitIdle() {
	e.t.Helper()
	testenv.Eventually(e.t, "admission idle", func() bool {
		st := e.adm.Stats()
		return st.Running == 0 && st.Queued == 0 && st.Tickets == 0 && st.Users == 0
	})
}

// texProcesses lists the processes working below dir: the TeX processes
// of this test's renders (xelatex, xdvipdfmx), whatever their parent.
func texProcesses(dir string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", ent.Name(), "cwd"))
		if err != nil || !strings.HasPrefix(cwd, dir+string(filepath.Separator)) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", ent.Name(), "comm"))
		out = append(out, ent.Name()+" "+strings.TrimSpace(string(comm)))
	}
	return out
}

// TestJobCancelRunning cancels a job while TeX typesets it: the TeX
// process group is gone within 2 s, the job is cancelled and keeps no
// result.
func TestJobCancelRunning(t *testing.T) {
	testenv.Require(t, "xelatex")
	if _, err := os.Stat("/proc/self/cwd"); err != nil {
		testenv.Missing(t, "/proc is needed to find TeX processes")
	}
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			typesetting := newStep()
			hooks := &hookRenderer{progress: func(ctx context.Context, p render.Progress) {
				if p.Pages >= 2 {
					// Not held: the test only learns that TeX runs.
					typesetting.once.Do(func() { close(typesetting.reached) })
				}
			}}
			e := newJobsEnv(t, jobsOptions{kind: kind, hooks: hooks, coldTeX: true})
			v := e.do(jsonBody(keyAlice, map[string]any{"markdown": longDoc("Long", 150)}, nil)).view(t, http.StatusAccepted)
			typesetting.await(t, "TeX typesetting page 2")
			if procs := texProcesses(e.texDir); len(procs) == 0 {
				t.Fatalf("no TeX process found below %s while it typesets", e.texDir)
			}

			cancelled := time.Now()
			c := e.do(request{method: http.MethodDelete, path: "/v1/jobs/" + v.ID, key: keyAlice}).view(t, http.StatusOK)
			if c.State != jobs.StateCancelled {
				t.Errorf("DELETE = state %s, want cancelled", c.State)
			}
			testenv.EventuallyWithin(t, 5*time.Second, "the TeX processes gone after DELETE", func() bool {
				return len(texProcesses(e.texDir)) == 0
			})
			if took := time.Since(cancelled); took > 2*time.Second {
				t.Errorf("TeX processes gone %s after DELETE, want within 2 s", took.Round(time.Millisecond))
			}
			e.waitIdle() // the worker gave its slot back
			if got := e.get(keyAlice, v.ID); got.State != jobs.StateCancelled || got.Error != nil {
				t.Errorf("job after cancel = %+v, want cancelled without error", got)
			}
			e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/result", key: keyAlice}).
				wantError(t, http.StatusConflict, CodeResultNotReady)
			if _, err := os.Stat(filepath.Join(e.store, "jobs", v.ID, "result.pdf")); !os.IsNotExist(err) {
				t.Errorf("result of the cancelled job: stat = %v, want none", err)
			}
		})
	}
}

// TestJobRefusalsAndFailures: a document that is broken in a way the
// cheap checks see is refused at acceptance, with its 4xx and no job; one
// that fails while rendering fails at once, on its first attempt, with its
// code.
func TestJobRefusalsAndFailures(t *testing.T) {
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newJobsEnv(t, jobsOptions{kind: kind, maxPages: 2})
			for _, c := range []struct {
				name   string
				req    request
				status int
				code   string
			}{
				{"math", jsonBody(keyAlice, map[string]any{"markdown": "# M\n\nBad $\\input{/etc/passwd}$ here.\n"}, nil), 422, limits.CodeMath},
				{"metadata", jsonBody(keyAlice, map[string]any{"markdown": "# M\n", "metadata": map[string]any{"colour": "red"}}, nil), 422, limits.CodeUnknown},
				{"missing image", multipartBody(keyAlice, "# M\n\n![x](img/none.png)\n", nil), 422, limits.CodeImage},
				{"broken image", multipartBody(keyAlice, "# M\n\n![x](a.png)\n", nil, asset{"a.png", []byte("not a png")}), 422, limits.CodeImage},
				{"too large", jsonBody(keyAlice, map[string]any{"markdown": strings.Repeat("x", limits.MaxMarkdownBytes+1)}, nil), 413, limits.CodeTooLarge},
				{"no markdown", jsonBody(keyAlice, map[string]any{"metadata": map[string]any{}}, nil), 400, limits.CodeInvalid},
				{"unknown field", jsonBody(keyAlice, map[string]any{"markdown": "x", "colour": 1}, nil), 400, limits.CodeInvalid},
				{"both sources", jsonBody(keyAlice, map[string]any{"markdown": "x", "source": map[string]any{"outline": map[string]any{"documentId": "x"}}}, nil), 400, limits.CodeInvalid},
				{"outline off", jsonBody(keyAlice, map[string]any{"source": map[string]any{"outline": map[string]any{"documentId": "hDYep1TPAM"}}}, nil), 404, httperr.CodeNotFound},
				{"bad key", jsonBody(keyAlice, map[string]any{"markdown": "x"}, map[string]string{"Idempotency-Key": strings.Repeat("k", 300)}), 422, limits.CodeInvalid},
				{"no credentials", jsonBody("", map[string]any{"markdown": "x"}, nil), 401, httperr.CodeUnauthorized},
				{"unknown key", jsonBody("key-nobody", map[string]any{"markdown": "x"}, nil), 401, httperr.CodeUnauthorized},
				{"text body", request{method: http.MethodPost, path: "/v1/jobs", key: keyAlice, ctype: "text/plain", body: []byte("x")}, 415, httperr.CodeUnsupported},
				{"method", request{method: http.MethodPut, path: "/v1/jobs", key: keyAlice}, 405, httperr.CodeMethod},
				{"result method", request{method: http.MethodDelete, path: "/v1/jobs/0196f0a4-0000-7000-8000-000000000000/result", key: keyAlice}, 405, httperr.CodeMethod},
				{"no such job", request{method: http.MethodGet, path: "/v1/jobs/0196f0a4-0000-7000-8000-000000000000", key: keyAlice}, 404, httperr.CodeNotFound},
				{"not a job id", request{method: http.MethodGet, path: "/v1/jobs/..%2f..%2fetc", key: keyAlice}, 404, httperr.CodeNotFound},
				{"list limit", request{method: http.MethodGet, path: "/v1/jobs?limit=0", key: keyAlice}, 400, limits.CodeInvalid},
			} {
				t.Run(c.name, func(t *testing.T) {
					e.do(c.req).wantError(t, c.status, c.code)
				})
			}
			if ids := e.listIDs(keyAlice); len(ids) != 0 {
				t.Fatalf("refused requests made jobs %v", ids)
			}

			// Over the page limit: found by TeX, so the job is accepted
			// and fails on its first attempt with the limit's code.
			v := e.do(jsonBody(keyAlice, map[string]any{"markdown": longDoc("Too long", 4)}, nil)).view(t, http.StatusAccepted)
			v = e.waitState(keyAlice, v.ID, jobs.StateFailed)
			if v.State != jobs.StateFailed || v.Attempts != 1 || v.Error == nil || v.Error.Code != limits.CodeTooManyPages || v.Error.Message == "" {
				t.Fatalf("failed job = %+v (error %+v), want failed after 1 attempt with too_many_pages", v, v.Error)
			}
			if v.FinishedAt == nil {
				t.Errorf("failed job has no finishedAt")
			}
			ps := e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/result", key: keyAlice}).
				wantError(t, http.StatusConflict, CodeResultNotReady)
			if ps[0].Source != limits.SourceRequest || !strings.Contains(ps[0].Message, "failed") {
				t.Errorf("result of a failed job = %+v, want a request problem saying it failed", ps[0])
			}
			e.waitIdle()
		})
	}
}

// TestJobResultExpires: once jobs.ttl has passed the result is 410.
func TestJobResultExpires(t *testing.T) {
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newJobsEnv(t, jobsOptions{kind: kind})
			v := e.do(jsonBody(keyAlice, map[string]any{"markdown": doc("Short lived")}, nil)).view(t, http.StatusAccepted)
			v = e.waitState(keyAlice, v.ID, jobs.StateSucceeded)
			if v.State != jobs.StateSucceeded {
				t.Fatalf("job = %+v, want succeeded", v)
			}
			if !v.ExpiresAt.After(*v.FinishedAt) {
				t.Errorf("expiresAt %s not after finishedAt %s", v.ExpiresAt, v.FinishedAt)
			}
			e.clock.Advance(v.ExpiresAt.Sub(e.clock.Now()) + time.Second)
			e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/result", key: keyAlice}).
				wantError(t, http.StatusGone, CodeExpired)
			// The job itself stays visible.
			if got := e.get(keyAlice, v.ID); got.State != jobs.StateSucceeded {
				t.Errorf("expired job = %s, want still succeeded", got.State)
			}
		})
	}
}

// TestJobsShareTheBudget: a job that renders holds an admission slot, so
// a synchronous render finds none (one slot, no queue) until the job is
// done.
func TestJobsShareTheBudget(t *testing.T) {
	held := newStep()
	first := true
	var mu sync.Mutex
	hooks := &hookRenderer{before: func(ctx context.Context) error {
		mu.Lock()
		hold := first
		first = false
		mu.Unlock()
		if hold {
			return held.wait(ctx)
		}
		return nil
	}}
	e := newJobsEnv(t, jobsOptions{kind: "sqlite", hooks: hooks,
		admission: admission.Config{Slots: 1, QueueDepth: 0, PerUser: 1, MaxWait: time.Minute}})
	defer held.open()
	v := e.do(jsonBody(keyAlice, map[string]any{"markdown": doc("Job first")}, nil)).view(t, http.StatusAccepted)
	held.await(t, "the job's render")
	if st := e.adm.Stats(); st.Running != 1 {
		t.Fatalf("admission while the job renders = %+v, want its slot taken", st)
	}
	syncRender := jsonBody(keyBob, map[string]any{"markdown": doc("Sync")}, nil)
	syncRender.path = "/v1/render"
	e.do(syncRender).wantError(t, http.StatusTooManyRequests, limits.CodeBusy)
	held.open()
	if got := e.waitState(keyAlice, v.ID, jobs.StateSucceeded); got.State != jobs.StateSucceeded {
		t.Fatalf("job = %+v, want succeeded", got)
	}
	// Once the job gave its slot back, the synchronous render gets it.
	e.waitIdle()
	e.do(syncRender).wantPDF(t)
	e.waitIdle()
}

// TestOutlineJob submits an Outline document as the reader whose cookie
// came along: the document and its images are fetched at acceptance, the
// render needs Outline no more, the cookie is stored nowhere, and every
// download asks Outline again whether this request's reader may download
// the document.
func TestOutlineJob(t *testing.T) {
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newJobsEnv(t, jobsOptions{kind: kind, outline: true})
			jane := e.fake.AddUser(outlinetest.User{Name: "Jane Doe", Token: "tok.jane-secret-1"})
			bob := e.fake.AddUser(outlinetest.User{Name: "Bob Roe", Token: "tok.bob-secret-2"})
			olga := e.fake.AddUser(outlinetest.User{Name: "Olga Other", Token: "tok.olga-secret-3", TeamID: "team-other"})
			img := e.fake.AddAttachment(outlinetest.Attachment{Body: pngImage(t, 60, 40)})
			access := map[string]outlinetest.Access{jane.ID: {Read: true, Download: true}, bob.ID: {Read: true}}
			d := e.fake.AddDocument(outlinetest.Document{
				Title: "Travel Policy", Text: "Book trains before planes.\n\n![Map](" + img + ")\n",
				CreatedBy: outlinetest.Person{ID: jane.ID, Name: jane.Name}, Access: access,
			})
			source := func(id string) map[string]any {
				return map[string]any{"source": map[string]any{"outline": map[string]any{"documentId": id}}}
			}
			result := func(who, id string) answer {
				return e.do(as(request{method: http.MethodGet, path: "/v1/jobs/" + id + "/result"}, who))
			}

			// Refused at acceptance: no download right, no access, no
			// cookie, a form post with a cookie.
			e.do(as(jsonBody("", source(d.ID), nil), bob.Token)).wantError(t, http.StatusForbidden, httperr.CodeForbidden)
			e.do(as(jsonBody("", source(d.ID), nil), olga.Token)).wantError(t, http.StatusForbidden, httperr.CodeForbidden)
			e.do(jsonBody(keyAlice, source(d.ID), nil)).wantError(t, http.StatusUnauthorized, httperr.CodeUnauthorized)
			e.do(as(multipartBody("", "# x\n", nil), jane.Token)).wantError(t, http.StatusUnsupportedMediaType, limits.CodeInvalid)
			e.do(as(jsonBody("", source("not an id!"), nil), jane.Token)).wantError(t, http.StatusBadRequest, limits.CodeInvalid)

			e.fake.ResetHits()
			idem := map[string]string{"Idempotency-Key": "travel"}
			v := e.do(as(jsonBody("", source(d.URLID), idem), jane.Token)).view(t, http.StatusAccepted)
			if hits := olHits(e.fake, "storage", ""); len(hits) != 1 {
				t.Errorf("storage hits at acceptance = %d, want the image fetched once", len(hits))
			}
			// The same document by its other id is the same request.
			if again := e.do(as(jsonBody("", source(d.ID), idem), jane.Token)).view(t, http.StatusOK); again.ID != v.ID {
				t.Errorf("same key, same document = job %s, want %s", again.ID, v.ID)
			}
			e.fake.ResetHits()
			v = e.waitState(jane.Token, v.ID, jobs.StateSucceeded)
			if v.State != jobs.StateSucceeded {
				t.Fatalf("Outline job = %+v (error %+v), want succeeded", v, v.Error)
			}
			// The render asked Outline for nothing: only the polls'
			// auth.info reached it.
			for _, h := range e.fake.Hits() {
				if h.Server != "outline" || h.Path != "/api/auth.info" {
					t.Errorf("hit during the render: %s %s %s", h.Server, h.Method, h.Path)
				}
			}

			pdf := result(jane.Token, v.ID).wantPDF(t)
			if got := pdfInfo(t, pdf, "Title"); got != "Travel Policy" {
				t.Errorf("PDF title = %q, want Outline's title", got)
			}
			if got := pdfInfo(t, pdf, "Author"); got != "Jane Doe" {
				t.Errorf("PDF author = %q, want Jane Doe", got)
			}
			if txt := pdfText(t, pdf); !strings.Contains(txt, "Book trains before planes.") {
				t.Errorf("PDF text lacks the document: %q", txt)
			}

			// Each download asks Outline about this request's reader.
			if got := e.get(bob.Token, v.ID); got.State != jobs.StateSucceeded {
				t.Errorf("bob (same team) sees state %s, want succeeded", got.State)
			}
			result(bob.Token, v.ID).wantError(t, http.StatusForbidden, httperr.CodeForbidden)
			// Readers of the team share the job, but only its submitter
			// may cancel it.
			e.do(request{method: http.MethodDelete, path: "/v1/jobs/" + v.ID, cookie: bob.Token}).wantError(t, http.StatusNotFound, httperr.CodeNotFound)
			result(olga.Token, v.ID).wantError(t, http.StatusNotFound, httperr.CodeNotFound)
			result(keyAlice, v.ID).wantError(t, http.StatusNotFound, httperr.CodeNotFound) // tenant acme, not the team
			result("", v.ID).wantError(t, http.StatusUnauthorized, httperr.CodeUnauthorized)
			e.fake.AddDocument(outlinetest.Document{ID: d.ID, URLID: d.URLID, Title: d.Title, Text: d.Text, CreatedBy: d.CreatedBy,
				Access: map[string]outlinetest.Access{jane.ID: {Read: true}}})
			result(jane.Token, v.ID).wantError(t, http.StatusForbidden, httperr.CodeForbidden)

			// The cookie was never stored: not in the artifact store, not
			// in the database. (The search does find what is stored.)
			if where := e.find("Book trains before planes."); where == "" {
				t.Errorf("the stored document text is not found; the search below proves nothing")
			}
			for _, tok := range []string{jane.Token, bob.Token, olga.Token} {
				if where := e.find(tok); where != "" {
					t.Errorf("token %s stored in %s", tok, where)
				}
			}
		})
	}
}

// find reports where secret is stored: a file of the artifact store or of
// the SQLite database, or a row of the PostgreSQL database; "" when
// nowhere.
func (e *jobsEnv) find(secret string) string {
	e.t.Helper()
	roots := []string{e.store}
	if p, ok := strings.CutPrefix(e.dataDB, "sqlite://"); ok {
		roots = append(roots, filepath.Dir(p))
	} else {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, e.dataDB)
		if err != nil {
			e.t.Fatal(err)
		}
		defer func() { _ = conn.Close(ctx) }()
		for _, table := range []string{"outprint_jobs", "outprint_idempotency", "river_job"} {
			var n int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" t WHERE t::text LIKE '%' || $1 || '%'", secret).Scan(&n); err != nil {
				e.t.Fatalf("search %s: %v", table, err)
			}
			if n > 0 {
				return table
			}
		}
	}
	found := ""
	for _, root := range roots {
		_ = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || found != "" {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
				found = p
			}
			return nil
		})
	}
	return found
}
