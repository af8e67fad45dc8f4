package jobs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

func TestOpenRejectsUnknownURLs(t *testing.T) {
	for _, u := range []string{"mysql://x", "", "sqlite://", "sqlite://a.db?mode=ro", "postgres://u:secret@[::1"} {
		_, err := Open(context.Background(), u)
		if err == nil {
			t.Errorf("Open(%q) = nil error, want one", u)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error %q shows the password", u, err)
		}
	}
}

func TestMigrateTwice(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			db := openTestDB(t, testDatabase(t, kind))
			if err := Migrate(context.Background(), db); err != nil {
				t.Fatalf("second Migrate = %v, want nil", err)
			}
			var n int
			if err := db.pool().queryRow(context.Background(), `SELECT count(*) FROM outprint_migration`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			ms, err := ownMigrations(db.dialect)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(ms) {
				t.Errorf("outprint_migration rows = %d, want %d (one per migration)", n, len(ms))
			}
		})
	}
}

func TestSubmitGetList(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newTeXRenderer(t)
			h := newHarness(t, kind, r, testConfig())

			// Before Start nothing runs, so the accepted state is visible.
			in := Input{
				Tenant: "acme", User: "alice", Name: "memo.md",
				Markdown: []byte("# Memo\n"), Metadata: []byte(`{"title":"Memo"}`),
				Assets: map[string][]byte{"img/a.png": []byte("png-bytes"), "../evil.png": []byte("evil")},
			}
			a, created, err := h.svc.Submit(ctx, in)
			if err != nil || !created {
				t.Fatalf("Submit = %+v, %v, %v; want a new job", a, created, err)
			}
			if a.State != StateQueued || a.Source != SourceMarkdown || a.Tenant != "acme" || a.User != "alice" {
				t.Errorf("Submit job = %+v, want queued markdown job of acme/alice", a)
			}
			b, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "bob", Markdown: []byte("pages: 2\n")})
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("x\n"),
				Outline: &OutlineSource{DocumentID: "doc-123", URL: "https://wiki.example.com", Title: "Doc"}})
			if err != nil {
				t.Fatal(err)
			}
			other, _, err := h.svc.Submit(ctx, Input{Tenant: "globex", User: "alice", Markdown: []byte("x\n")})
			if err != nil {
				t.Fatal(err)
			}

			got, err := h.svc.Get(ctx, "acme", a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != a.ID || got.State != StateQueued || got.Name != "memo.md" || !got.CreatedAt.Equal(a.CreatedAt) ||
				!got.ExpiresAt.Equal(a.CreatedAt.Add(time.Hour)) || got.StartedAt != nil || got.Phase != "" {
				t.Errorf("Get = %+v, want the submitted queued job %+v", got, a)
			}
			if got, _ := h.svc.Get(ctx, "acme", c.ID); got.Source != SourceOutline || got.OutlineDocumentID != "doc-123" {
				t.Errorf("Get(outline job) = %+v, want source outline, document doc-123", got)
			}

			// Inputs are stored at deterministic keys before the row.
			files := h.jobFiles(a.ID)
			want := []string{"assets/%2E.%2Fevil.png", "assets/img%2Fa.png", "document.md", "metadata.json"}
			if !slices.Equal(files, want) {
				t.Errorf("stored files = %v, want %v", files, want)
			}
			if b, _ := os.ReadFile(filepath.Join(h.store.Root(), "jobs", a.ID, "document.md")); string(b) != "# Memo\n" {
				t.Errorf("document.md = %q, want the Markdown", b)
			}

			tests := []struct {
				tenant, user string
				want         []string
			}{
				{"acme", "", []string{c.ID, b.ID, a.ID}},
				{"acme", "alice", []string{c.ID, a.ID}},
				{"globex", "", []string{other.ID}},
				{"initech", "", nil},
			}
			for _, tt := range tests {
				list, err := h.svc.List(ctx, tt.tenant, tt.user, 0)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, j := range list {
					ids = append(ids, j.ID)
				}
				if !slices.Equal(ids, tt.want) {
					t.Errorf("List(%s, %q) = %v, want %v", tt.tenant, tt.user, ids, tt.want)
				}
			}
			if list, _ := h.svc.List(ctx, "acme", "", 1); len(list) != 1 || list[0].ID != c.ID {
				t.Errorf("List(acme, limit 1) = %+v, want the newest job", list)
			}

			// Another tenant's job does not exist for the caller.
			for name, call := range map[string]func() error{
				"Get":    func() error { _, err := h.svc.Get(ctx, "globex", a.ID); return err },
				"Result": func() error { _, _, err := h.svc.Result(ctx, "globex", a.ID); return err },
				"Cancel": func() error { _, err := h.svc.Cancel(ctx, "globex", a.ID); return err },
				"badID":  func() error { _, err := h.svc.Get(ctx, "acme", "../../etc"); return err },
				"upper": func() error {
					_, err := h.svc.Get(ctx, "acme", uuid.MustParse(a.ID).URN())
					return err
				},
			} {
				if err := call(); !errors.Is(err, ErrNotFound) {
					t.Errorf("%s of another tenant's job = %v, want ErrNotFound", name, err)
				}
			}
			if j, _ := h.svc.Get(ctx, "acme", a.ID); j.State != StateQueued {
				t.Errorf("after another tenant's Cancel the job is %s, want queued", j.State)
			}

			h.start(h.svc)
			for _, id := range []string{a.ID, b.ID} {
				j := h.waitTerminal("acme", id)
				if j.State != StateSucceeded || j.Attempts != 1 || j.StartedAt == nil || j.FinishedAt == nil ||
					j.Phase != "" || j.ErrorCode != "" {
					t.Errorf("job %s = %+v, want succeeded after one attempt", id, j)
				}
				if !j.ExpiresAt.Equal(j.FinishedAt.Add(time.Hour)) {
					t.Errorf("ExpiresAt = %s, want FinishedAt + TTL (%s)", j.ExpiresAt, j.FinishedAt.Add(time.Hour))
				}
			}
			j := h.waitTerminal("acme", b.ID)
			if j.Pages != 2 {
				t.Errorf("pages = %d, want 2", j.Pages)
			}
			rc, _, err := h.svc.Result(ctx, "acme", b.ID)
			if err != nil {
				t.Fatal(err)
			}
			pdf, _ := io.ReadAll(rc)
			_ = rc.Close()
			checkPDF(t, pdf, 2, "outprint job "+b.ID)

			// The renderer got the stored input back.
			r.mu.Lock()
			progress := r.progress[a.ID]
			r.mu.Unlock()
			if len(progress) == 0 || progress[0] != "preparing:0" {
				t.Errorf("progress of %s = %v, want it to start with preparing:0", a.ID, progress)
			}
		})
	}
}

// inputRecorder is a Renderer that keeps the RenderInput it was given and
// answers with the tiny PDF; it checks the round trip through the store.
type inputRecorder struct {
	mu  sync.Mutex
	got map[string]RenderInput
}

func (r *inputRecorder) Render(ctx context.Context, in RenderInput, progress func(string, int)) ([]byte, error) {
	r.mu.Lock()
	r.got[in.JobID] = in
	r.mu.Unlock()
	return cannedPDFRenderer{}.Render(ctx, in, progress)
}

func TestInputRoundTrip(t *testing.T) {
	requireTinyPDF(t)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := &inputRecorder{got: map[string]RenderInput{}}
			h := newHarness(t, kind, r, testConfig())
			h.start(h.svc)
			updated := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
			in := Input{
				Tenant: "acme", User: "alice", Name: "n.md", Markdown: []byte("# T\n![a](/api/attachments.redirect?id=1)\n"),
				Metadata: []byte(`{"lang":"de"}`),
				Assets:   map[string][]byte{"/api/attachments.redirect?id=1": {0x89, 'P', 'N', 'G'}, "b.svg": []byte("<svg/>")},
				Outline:  &OutlineSource{DocumentID: "d1", URL: "https://wiki", Title: "T", Author: "Ann", UpdatedAt: updated, Language: "de"},
			}
			job, _, err := h.svc.Submit(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if j := h.waitTerminal("acme", job.ID); j.State != StateSucceeded {
				t.Fatalf("job = %+v, want succeeded", j)
			}
			r.mu.Lock()
			got := r.got[job.ID]
			r.mu.Unlock()
			if got.Tenant != "acme" || got.User != "alice" || got.Name != "n.md" || got.Attempt != 1 ||
				string(got.Markdown) != string(in.Markdown) || string(got.Metadata) != string(in.Metadata) ||
				len(got.Assets) != 2 || string(got.Assets["b.svg"]) != "<svg/>" ||
				string(got.Assets["/api/attachments.redirect?id=1"]) != string(in.Assets["/api/attachments.redirect?id=1"]) ||
				got.Outline == nil || *got.Outline != *in.Outline {
				t.Errorf("RenderInput = %+v, want the submitted input %+v", got, in)
			}
		})
	}
}

func requireTinyPDF(t testing.TB) {
	t.Helper()
	testenv.Require(t, "xelatex")
	if tinyPDF == nil {
		t.Fatal("xelatex is installed but the tiny PDF could not be made (see TestMain output)")
	}
}

func TestIdempotency(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarness(t, kind, nil, testConfig())
			in := Input{Tenant: "acme", User: "alice", Markdown: []byte("# A\n"), IdempotencyKey: "key-1"}
			first, created, err := h.svc.Submit(ctx, in)
			if err != nil || !created {
				t.Fatalf("Submit = %v, %v; want created", created, err)
			}

			tests := []struct {
				name        string
				in          Input
				wantErr     error
				wantSame    bool
				wantCreated bool
			}{
				{"same request", in, nil, true, false},
				{"same request, explicit digest", func() Input { i := in; i.Digest = RequestDigest(in); return i }(), nil, true, false},
				{"other user, same tenant and body", func() Input { i := in; i.User = "bob"; return i }(), nil, true, false},
				{"other body", func() Input { i := in; i.Markdown = []byte("# B\n"); return i }(), ErrIdempotencyMismatch, false, false},
				{"other metadata", func() Input { i := in; i.Metadata = []byte(`{}`); return i }(), ErrIdempotencyMismatch, false, false},
				{"other asset", func() Input { i := in; i.Assets = map[string][]byte{"a.png": {1}}; return i }(), ErrIdempotencyMismatch, false, false},
				{"other tenant", func() Input { i := in; i.Tenant = "globex"; return i }(), nil, false, true},
				{"other key", func() Input { i := in; i.IdempotencyKey = "key-2"; return i }(), nil, false, true},
				{"no key", func() Input { i := in; i.IdempotencyKey = ""; return i }(), nil, false, true},
			}
			for _, tt := range tests {
				job, created, err := h.svc.Submit(ctx, tt.in)
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("%s: Submit err = %v, want %v", tt.name, err, tt.wantErr)
					continue
				}
				if err != nil {
					continue
				}
				if created != tt.wantCreated || (job.ID == first.ID) != tt.wantSame {
					t.Errorf("%s: Submit = %s created=%v, want same=%v created=%v", tt.name, job.ID, created, tt.wantSame, tt.wantCreated)
				}
			}

			// A mismatch stores nothing: only the jobs created above exist.
			names, _ := h.store.List(ctx, "jobs")
			if len(names) != 4 {
				t.Errorf("stored job folders = %d, want 4 (mismatches store nothing)", len(names))
			}

			// Concurrent first uses of one key create exactly one job.
			const n = 8
			var wg sync.WaitGroup
			ids := make([]string, n)
			createdCount := make([]bool, n)
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					j, c, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("race\n"), IdempotencyKey: "race"})
					ids[i], createdCount[i], errs[i] = j.ID, c, err
				}()
			}
			wg.Wait()
			nCreated := 0
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("concurrent Submit: %v", errs[i])
				}
				if ids[i] != ids[0] {
					t.Errorf("concurrent Submit ids = %v, want one id", ids)
					break
				}
				if createdCount[i] {
					nCreated++
				}
			}
			if nCreated != 1 {
				t.Errorf("concurrent Submits created %d jobs, want 1", nCreated)
			}
			if names, _ := h.store.List(ctx, "jobs"); len(names) != 5 {
				t.Errorf("stored job folders after the race = %d, want 5 (losers' inputs removed)", len(names))
			}

			for _, bad := range []string{"has space", string(make([]byte, 256)), "tab\t", "é"} {
				_, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("x"), IdempotencyKey: bad})
				var le *limits.Error
				if !errors.As(err, &le) || le.Kind != limits.KindDocument || le.Problems[0].Field != "Idempotency-Key" {
					t.Errorf("Submit(key %q) = %v, want a 422 limits.Error on Idempotency-Key", bad, err)
				}
			}
			_, _, err = h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: make([]byte, limits.MaxMarkdownBytes+1)})
			var le *limits.Error
			if !errors.As(err, &le) || le.Code() != limits.CodeTooLarge {
				t.Errorf("Submit(too large) = %v, want too_large", err)
			}
		})
	}
}

func TestResultNotReadyThenExpired(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarness(t, kind, newTeXRenderer(t), testConfig())
			job, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("x\n")})
			if err != nil {
				t.Fatal(err)
			}
			if _, j, err := h.svc.Result(ctx, "acme", job.ID); !errors.Is(err, ErrNotReady) || j.State != StateQueued {
				t.Errorf("Result(queued) = %v (%s), want ErrNotReady", err, j.State)
			}
			h.start(h.svc)
			done := h.waitTerminal("acme", job.ID)
			rc, j, err := h.svc.Result(ctx, "acme", job.ID)
			if err != nil {
				t.Fatalf("Result(succeeded) = %v", err)
			}
			pdf, _ := io.ReadAll(rc)
			_ = rc.Close()
			checkPDF(t, pdf, 1, job.ID)
			if j.ID != job.ID {
				t.Errorf("Result job = %s, want %s", j.ID, job.ID)
			}

			// Past ExpiresAt the result is gone for clients, before and
			// after the sweep deleted the files.
			h.clock.Advance(done.ExpiresAt.Sub(h.clock.Now()) + time.Millisecond)
			if _, _, err := h.svc.Result(ctx, "acme", job.ID); !errors.Is(err, ErrExpired) {
				t.Errorf("Result(expired) = %v, want ErrExpired", err)
			}
			res, err := h.svc.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Artifacts != 1 {
				// The sweep River runs once its leader starts (RunOnStart)
				// may come after the expiry, before this one: then it
				// deleted the files and recorded that.
				var deleted bool
				if err := h.svc.db.pool().queryRow(ctx, `SELECT files_deleted FROM outprint_jobs WHERE id = $1`, job.ID).Scan(&deleted); err != nil {
					t.Fatal(err)
				}
				if res.Artifacts != 0 || !deleted {
					t.Errorf("Sweep().Artifacts = %d (files_deleted %v), want 1, or 0 after the start-up sweep deleted them", res.Artifacts, deleted)
				}
			}
			if files := h.jobFiles(job.ID); len(files) != 0 {
				t.Errorf("files after sweep = %v, want none", files)
			}
			if _, _, err := h.svc.Result(ctx, "acme", job.ID); !errors.Is(err, ErrExpired) {
				t.Errorf("Result(swept) = %v, want ErrExpired", err)
			}
			if j, err := h.svc.Get(ctx, "acme", job.ID); err != nil || j.State != StateSucceeded {
				t.Errorf("Get after sweep = %+v, %v; the row stays for RowRetention", j, err)
			}
		})
	}
}

func TestCancelQueued(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newTeXRenderer(t)
			rec := newRecorder()
			cfg := testConfig()
			cfg.Observer = rec
			h := newHarness(t, kind, r, cfg)
			job, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("x\n")})
			if err != nil {
				t.Fatal(err)
			}
			c, err := h.svc.Cancel(ctx, "acme", job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if c.State != StateCancelled || c.FinishedAt == nil {
				t.Errorf("Cancel = %+v, want cancelled with FinishedAt", c)
			}
			again, err := h.svc.Cancel(ctx, "acme", job.ID)
			if err != nil || again.State != StateCancelled || !again.FinishedAt.Equal(*c.FinishedAt) {
				t.Errorf("second Cancel = %+v, %v; want the job unchanged", again, err)
			}

			// A later job runs; the cancelled one never does.
			h.svc.TestSignals.Init(t)
			h.start(h.svc)
			later, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("y\n")})
			if err != nil {
				t.Fatal(err)
			}
			if j := h.waitTerminal("acme", later.ID); j.State != StateSucceeded {
				t.Fatalf("later job = %+v, want succeeded", j)
			}
			r.mu.Lock()
			calls := r.calls[job.ID]
			r.mu.Unlock()
			if calls != 0 {
				t.Errorf("renders of the cancelled job = %d, want 0", calls)
			}
			if _, _, err := h.svc.Result(ctx, "acme", job.ID); !errors.Is(err, ErrNotReady) {
				t.Errorf("Result(cancelled) = %v, want ErrNotReady", err)
			}
			// Cancelling a finished job changes nothing.
			if j, err := h.svc.Cancel(ctx, "acme", later.ID); err != nil || j.State != StateSucceeded {
				t.Errorf("Cancel(succeeded) = %+v, %v; want it still succeeded", j, err)
			}
			// The observer hears of the later job's end right after its
			// state commits, so waitTerminal can see the state first.
			h.svc.TestSignals.Settled.WaitFor(testenv.WaitTimeout, func(id string) bool {
				f, _, _ := rec.snapshot()
				return id == later.ID && f["succeeded/"] > 0
			})
			if f, _, _ := rec.snapshot(); f["cancelled/"] != 1 || f["succeeded/"] != 1 {
				t.Errorf("observer finished = %v, want one cancelled and one succeeded", f)
			}
		})
	}
}

func TestCancelRunning(t *testing.T) {
	for _, kind := range kinds {
		for _, where := range []string{"same process", "other process"} {
			t.Run(kind+"/"+where, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				r := newTeXRenderer(t)
				h := newHarness(t, kind, r, testConfig())
				h.svc.TestSignals.Init(t)
				h.start(h.svc)
				canceller := h.svc
				if where == "other process" {
					// A second Service without workers, as a gateway: its
					// Cancel reaches the render through the database only.
					canceller = h.service(nil, testConfig())
				}
				job, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("loop\n")})
				if err != nil {
					t.Fatal(err)
				}
				waitStarted(t, r, job.ID)
				// Progress reaches the row while TeX runs.
				running := h.wait("acme", job.ID, 30*time.Second, func(j Job) bool {
					return j.State == StateRunning && j.Phase == PhaseRendering && j.Pages >= 2
				})
				if running.StartedAt == nil || running.Attempts != 1 {
					t.Errorf("running job = %+v, want StartedAt and 1 attempt", running)
				}

				cancelAt := time.Now()
				c, err := canceller.Cancel(ctx, "acme", job.ID)
				if err != nil {
					t.Fatal(err)
				}
				if c.State != StateCancelled {
					t.Errorf("Cancel = %s, want cancelled", c.State)
				}
				var seen, reaped time.Time
				testenv.EventuallyWithin(t, 10*time.Second, "the render's context cancelled", func() bool {
					r.mu.Lock()
					defer r.mu.Unlock()
					seen, reaped = r.ctxDone[job.ID], r.reaped[job.ID]
					return !seen.IsZero()
				})
				if d := reaped.Sub(cancelAt); d > 2*time.Second {
					t.Errorf("TeX process reaped %s after Cancel, want within 2 s", d)
				}
				// The worker settles and stores nothing.
				h.svc.TestSignals.Settled.WaitFor(testenv.WaitTimeout, func(id string) bool { return id == job.ID })
				j, _ := h.svc.Get(ctx, "acme", job.ID)
				if j.State != StateCancelled {
					t.Errorf("job after cancel = %s, want cancelled", j.State)
				}
				if files := h.jobFiles(job.ID); slices.Contains(files, "result.pdf") {
					t.Errorf("files = %v, want no result", files)
				}
			})
		}
	}
}

func waitStarted(t *testing.T, r *texRenderer, id string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case got := <-r.started:
			if got == id {
				return
			}
		case <-timeout:
			t.Fatalf("TeX never started for job %s", id)
		}
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name         string
		markdown     string
		jobTimeout   time.Duration
		wantState    string
		wantCode     string
		wantAttempts int
		wantRetried  int
	}{
		{"limit error fails at once", "pages: 5\n", 0, StateFailed, limits.CodeTooManyPages, 1, 0},
		{"transient error retries then succeeds", "transient: 1\n", 0, StateSucceeded, "", 2, 1},
		{"transient errors exhaust the attempts", "transient: 99\n", 0, StateFailed, CodeExhausted, 3, 2},
		{"timeout fails with its code", "loop\n", 2 * time.Second, StateFailed, limits.CodeTimeout, 1, 0},
	}
	for _, kind := range kinds {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				r := newTeXRenderer(t)
				rec := newRecorder()
				cfg := testConfig()
				cfg.Observer = rec
				if tt.jobTimeout > 0 {
					cfg.JobTimeout = tt.jobTimeout
				}
				h := newHarness(t, kind, r, cfg)
				h.svc.TestSignals.Init(t)
				h.start(h.svc)
				job, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte(tt.markdown)})
				if err != nil {
					t.Fatal(err)
				}
				j := h.waitTerminal("acme", job.ID)
				if j.State != tt.wantState || j.ErrorCode != tt.wantCode || j.Attempts != tt.wantAttempts {
					t.Errorf("job = %s/%q after %d attempts, want %s/%q after %d", j.State, j.ErrorCode, j.Attempts,
						tt.wantState, tt.wantCode, tt.wantAttempts)
				}
				if tt.wantState == StateFailed {
					if j.ErrorMessage == "" || strings.Contains(j.ErrorMessage, "scratch space") {
						t.Errorf("error message = %q, want a client-facing text without internal details", j.ErrorMessage)
					}
					if _, _, err := h.svc.Result(ctx, "acme", job.ID); !errors.Is(err, ErrNotReady) {
						t.Errorf("Result(failed) = %v, want ErrNotReady", err)
					}
				}
				r.mu.Lock()
				calls := r.calls[job.ID]
				r.mu.Unlock()
				if calls != tt.wantAttempts {
					t.Errorf("renders = %d, want %d", calls, tt.wantAttempts)
				}
				// The observer hears of the end right after the state
				// commits, so the poll above can see the state first.
				// The attempt that ended it has returned once it is settled.
				h.svc.TestSignals.Settled.WaitFor(testenv.WaitTimeout, func(id string) bool {
					f, _, _ := rec.snapshot()
					return id == job.ID && f[tt.wantState+"/"+tt.wantCode] > 0
				})
				f, retried, started := rec.snapshot()
				if retried != tt.wantRetried || started != 1 || f[tt.wantState+"/"+tt.wantCode] != 1 {
					t.Errorf("observer: retried %d started %d finished %v, want %d, 1, {%s/%s:1}",
						retried, started, f, tt.wantRetried, tt.wantState, tt.wantCode)
				}
			})
		}
	}
}

func TestStopReleasesRunningJobs(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newTeXRenderer(t)
			h := newHarness(t, kind, r, testConfig())
			h.start(h.svc)
			job, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("loop-first\n")})
			if err != nil {
				t.Fatal(err)
			}
			waitStarted(t, r, job.ID)
			h.wait("acme", job.ID, 30*time.Second, func(j Job) bool { return j.State == StateRunning })

			sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			stopAt := time.Now()
			if err := h.svc.Stop(sctx); err != nil {
				t.Fatalf("Stop = %v", err)
			}
			if d := time.Since(stopAt); d > 5*time.Second {
				t.Errorf("Stop took %s, want the grace period and a prompt cancel", d)
			}
			j, _ := h.svc.Get(ctx, "acme", job.ID)
			if j.State != StateQueued || j.ErrorCode != "" {
				t.Errorf("job after Stop = %+v, want queued again", j)
			}

			// The next process finishes it, without spending an attempt on
			// the release.
			next := h.service(r, testConfig())
			h.start(next)
			j = h.waitTerminal("acme", job.ID)
			if j.State != StateSucceeded || j.Attempts != 1 {
				t.Errorf("job after restart = %s after %d attempts, want succeeded, attempt 1 (released, not failed)", j.State, j.Attempts)
			}
		})
	}
}

// budget is a counting semaphore, like the one the integrator shares with
// synchronous renders; it records the highest use.
type budget struct {
	slots      chan struct{}
	mu         sync.Mutex
	inUse, max int
}

func (b *budget) Acquire(ctx context.Context) error {
	select {
	case b.slots <- struct{}{}:
		b.mu.Lock()
		b.inUse++
		b.max = max(b.max, b.inUse)
		b.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *budget) Release() {
	b.mu.Lock()
	b.inUse--
	b.mu.Unlock()
	<-b.slots
}

func TestBudgetBoundsConcurrency(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			bud := &budget{slots: make(chan struct{}, 1)}
			cfg := testConfig()
			cfg.MaxWorkers = 4
			cfg.Budget = bud
			cfg.BudgetWait = 200 * time.Millisecond
			h := newHarness(t, kind, newTeXRenderer(t), cfg)
			h.svc.TestSignals.Init(t)
			h.start(h.svc)

			// While synchronous renders hold the whole budget, a job waits
			// queued and spends no attempt.
			if err := bud.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			first, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("first\n")})
			if err != nil {
				t.Fatal(err)
			}
			// Its attempt waits BudgetWait for a slot and gives the job back.
			h.svc.TestSignals.Settled.WaitFor(testenv.WaitTimeout, func(id string) bool { return id == first.ID })
			if j, _ := h.svc.Get(ctx, "acme", first.ID); j.State != StateQueued || j.Attempts != 0 {
				t.Errorf("job while the budget is busy = %s after %d attempts, want queued after 0", j.State, j.Attempts)
			}
			bud.Release()
			if j := h.waitTerminal("acme", first.ID); j.State != StateSucceeded || j.Attempts != 1 {
				t.Errorf("job after the budget freed = %s after %d attempts, want succeeded after 1", j.State, j.Attempts)
			}
			bud.mu.Lock()
			bud.max = 0
			bud.mu.Unlock()

			ids := []string{first.ID}
			for i := range 4 {
				j, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte(fmt.Sprintf("doc %d\n", i))})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, j.ID)
			}
			for _, id := range ids {
				if j := h.waitTerminal("acme", id); j.State != StateSucceeded {
					t.Errorf("job %s = %s, want succeeded", id, j.State)
				}
			}
			// The worker gives its slot back as its last step, after the
			// job's row says succeeded: wait (bounded) for that.
			testenv.Eventually(t, "the budget given back", func() bool {
				bud.mu.Lock()
				defer bud.mu.Unlock()
				return bud.inUse == 0
			})
			bud.mu.Lock()
			defer bud.mu.Unlock()
			if bud.max != 1 || bud.inUse != 0 {
				t.Errorf("budget max in use = %d, in use after = %d; want 1 and 0", bud.max, bud.inUse)
			}
			st, err := h.svc.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.ByState[StateSucceeded] != 5 || st.ByState[StateQueued] != 0 || st.OldestQueued != 0 {
				t.Errorf("Stats = %+v, want 5 succeeded, nothing queued", st)
			}
		})
	}
}

// oldID returns a version-7 job id created at t, as a folder left by a
// process that crashed at that time would be named.
func oldID(t time.Time) string {
	u := uuid.Must(uuid.NewV7())
	ms := uint64(t.UnixMilli())
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], ms)
	copy(u[0:6], b[2:8])
	return u.String()
}

func TestRetention(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := testConfig()
			cfg.SweepInterval = 300 * time.Millisecond
			h := newHarness(t, kind, newTeXRenderer(t), cfg)
			h.svc.TestSignals.Init(t)
			orphan := oldID(time.Now())
			h.start(h.svc)
			job, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("x\n"), IdempotencyKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			if j := h.waitTerminal("acme", job.ID); j.State != StateSucceeded {
				t.Fatalf("job = %s, want succeeded", j.State)
			}
			// Past RowRetention (and TTL): an input folder without a row,
			// from a crash when the job was made, and one from just now (an
			// acceptance in flight) that must stay.
			h.clock.Advance(testConfig().WithDefaults().RowRetention + time.Minute)
			fresh := oldID(h.clock.Now())
			for _, id := range []string{orphan, fresh} {
				if err := h.store.Put(ctx, Keys{id}.Document(), strings.NewReader("x")); err != nil {
					t.Fatal(err)
				}
			}
			// River's periodic sweep deletes the files, the row and the
			// orphan, without being called: a pass that began before the
			// clock moved may find nothing, the next does.
			var names []string
			h.svc.TestSignals.Swept.WaitFor(testenv.WaitTimeout, func(SweepResult) bool {
				_, err := h.svc.Get(ctx, "acme", job.ID)
				names, _ = h.store.List(ctx, "jobs")
				return errors.Is(err, ErrNotFound) && slices.Equal(names, []string{fresh})
			})
			if !slices.Equal(names, []string{fresh}) {
				t.Errorf("stored folders = %v, want only the fresh one %s", names, fresh)
			}
			// The key went with the row: it can be used for a new job.
			again, created, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("other\n"), IdempotencyKey: "k"})
			if err != nil || !created || again.ID == job.ID {
				t.Errorf("Submit(reused key after retention) = %s, %v, %v; want a new job", again.ID, created, err)
			}
		})
	}
}

func TestLostJobFails(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := newHarness(t, kind, nil, testConfig())
			job, _, err := h.svc.Submit(ctx, Input{Tenant: "acme", User: "alice", Markdown: []byte("x\n")})
			if err != nil {
				t.Fatal(err)
			}
			// River discards a job whose worker died on its last attempt
			// (the rescuer); the row must not stay queued forever.
			if _, err := h.db.pool().exec(ctx, `UPDATE river_job SET state = 'discarded', finalized_at = $1`, time.Now()); err != nil {
				t.Fatal(err)
			}
			res, err := h.svc.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			j, _ := h.svc.Get(ctx, "acme", job.ID)
			if res.Lost != 1 || j.State != StateFailed || j.ErrorCode != CodeExhausted {
				t.Errorf("after Sweep: lost %d, job %s/%s; want 1, failed/%s", res.Lost, j.State, j.ErrorCode, CodeExhausted)
			}
		})
	}
}

func TestAssetKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a.png", "a.png"},
		{"img/a.png", "img%2Fa.png"},
		{"..", "%2E."},
		{".hidden", "%2Ehidden"},
		{"/api/attachments.redirect?id=1", "%2Fapi%2Fattachments.redirect%3Fid%3D1"},
		{"", "h-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	}
	for _, tt := range tests {
		if got := AssetKey(tt.in); got != tt.want {
			t.Errorf("AssetKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := AssetKey(string(make([]byte, 300)))
	if len(long) != 66 || long[:2] != "h-" {
		t.Errorf("AssetKey(300 bytes) = %q, want a hashed key", long)
	}
}

func TestConfigDefaults(t *testing.T) {
	err := Config{JobTimeout: time.Minute, RescueAfter: time.Minute}.WithDefaults().validate()
	if err == nil {
		t.Error("validate(RescueAfter = JobTimeout) = nil, want an error")
	}
	c := Config{}.WithDefaults()
	if err := c.validate(); err != nil || c.TTL != DefaultTTL || c.RowRetention != 7*24*time.Hour || c.MaxWorkers != 1 ||
		c.LeaseTimeout != DefaultLeaseTimeout || c.MaxQueuedPerTenant != DefaultMaxQueuedPerTenant || c.Webhooks.MaxWorkers != 8 {
		t.Errorf("Config{}.WithDefaults() = %+v, validate = %v; want SPEC defaults", c, err)
	}
	if _, err := New(nil, nil, nil, Config{MaxWorkers: -1}); err == nil {
		t.Error("New(MaxWorkers -1) = nil error, want one")
	}
}
