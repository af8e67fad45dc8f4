package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/raster"
	"github.com/outprint/outprint/internal/testenv"
)

// countingRaster is the real Rasterizer with a count of the drawings it
// makes and the most that ran at once; with hold set, each drawing waits
// for it to open first (while counted as running).
type countingRaster struct {
	next Rasterizer
	hold *step

	mu                   sync.Mutex
	calls, running, most int
}

func (c *countingRaster) Page(ctx context.Context, pdf []byte, page, width int) ([]byte, error) {
	c.mu.Lock()
	c.calls++
	c.running++
	c.most = max(c.most, c.running)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}()
	if c.hold != nil {
		if err := c.hold.wait(ctx); err != nil {
			return nil, err
		}
	}
	return c.next.Page(ctx, pdf, page, width)
}

func (c *countingRaster) snapshot() (calls, most int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.most
}

func (c *countingRaster) drawing() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// previewEnv is a job server whose thumbnails are drawn by a counted real
// Rasterizer with cfg's bounds.
func previewEnv(t *testing.T, ac admission.Config, cfg raster.Config) (*jobsEnv, *countingRaster) {
	t.Helper()
	return previewEnvWith(t, jobsOptions{admission: ac}, cfg)
}

// previewEnvWith is previewEnv with more of the server's options.
func previewEnvWith(t *testing.T, o jobsOptions, cfg raster.Config) (*jobsEnv, *countingRaster) {
	t.Helper()
	counted := &countingRaster{}
	o.kind, o.web = "sqlite", true
	o.configure = func(e *jobsEnv, c *Config) {
		rz, err := raster.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		counted.next = rz
		c.Raster = counted
	}
	return newJobsEnv(t, o), counted
}

// TestPreviewAdmission: page previews go through admission (issue 24: one
// user ran 40 pdftoppm at once while another tenant's render slowed from
// 4 s to 15 s). Forty concurrent previews of one user (perUser 1) draw one
// at a time — the others are 429 user_limit — and another tenant's render
// meanwhile gets its slot and succeeds.
func TestPreviewAdmission(t *testing.T) {
	e, counted := previewEnv(t, admission.Config{Slots: 2, QueueDepth: 8, PerUser: 1, MaxWait: time.Minute}, raster.Config{})
	v := e.do(jsonBody(keyAlice, map[string]any{"markdown": longDoc("Previews", 3)}, nil)).view(t, http.StatusAccepted)
	v = e.waitState(keyAlice, v.ID, jobs.StateSucceeded)
	if v.Progress.Pages < 2 {
		t.Fatalf("pages = %d, want several", v.Progress.Pages)
	}

	const n = 40
	statuses := make(chan answer, n+1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { // ends with its request
			defer wg.Done()
			// Distinct pages and widths: none is in the cache.
			path := fmt.Sprintf("/v1/jobs/%s/pages/%d.png?width=%d", v.ID, 1+i%2, 50*(1+i/2))
			statuses <- e.do(request{method: http.MethodGet, path: path, key: keyAlice})
		}()
	}
	// Another tenant renders meanwhile.
	other := e.do(jsonBody(keyOscar, map[string]any{"markdown": longDoc("Other", 2)}, nil)).view(t, http.StatusAccepted)
	wg.Wait()
	close(statuses)
	ok, refused := 0, 0
	for a := range statuses {
		switch {
		case a.status == http.StatusOK:
			ok++
		case a.status == http.StatusTooManyRequests:
			a.wantError(t, http.StatusTooManyRequests, limits.CodeUserLimit)
			refused++
		default:
			t.Errorf("preview = %d %s, want 200 or 429 user_limit", a.status, a.body)
		}
	}
	calls, most := counted.snapshot()
	if ok == 0 || most > 1 || calls != ok {
		t.Errorf("%d previews drawn (%d answered 200, %d refused), at most %d at once; want at least one, and one at a time", calls, ok, refused, most)
	}
	if got := e.waitState(keyOscar, other.ID, jobs.StateSucceeded); got.Progress.Pages < 2 {
		t.Errorf("other tenant's job = %+v, want succeeded", got)
	}
	waitTickets(t, e.adm, 0)
}

// TestPreviewRefusalCached: a page too costly to draw is 413 resource,
// and asking again answers the same from the record kept beside the
// result, without another drawing (issue 24: failures were not cached).
func TestPreviewRefusalCached(t *testing.T) {
	e, counted := previewEnv(t, admission.Config{}, raster.Config{MaxPNG: 2000})
	v := e.do(jsonBody(keyAlice, map[string]any{"markdown": longDoc("Refused", 2)}, nil)).view(t, http.StatusAccepted)
	v = e.waitState(keyAlice, v.ID, jobs.StateSucceeded)
	path := "/v1/jobs/" + v.ID + "/pages/1.png?width=1600"
	for range 3 {
		e.do(request{method: http.MethodGet, path: path, key: keyAlice}).wantError(t, http.StatusRequestEntityTooLarge, limits.CodeResource)
	}
	if calls, _ := counted.snapshot(); calls != 1 {
		t.Errorf("drawings of a refused page asked 3 times = %d, want 1", calls)
	}
	// Another width of the same page is a drawing of its own.
	e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/pages/1.png?width=50", key: keyAlice})
	if calls, _ := counted.snapshot(); calls != 2 {
		t.Errorf("drawings after another width = %d, want 2", calls)
	}
}

// previewFigures is the preview pool's part of GET /readyz.
type previewFigures struct{ Slots, Running, Queued int }

func (e *jobsEnv) previews() previewFigures {
	e.t.Helper()
	a := e.do(request{method: http.MethodGet, path: "/readyz"})
	var v struct{ Previews previewFigures }
	if a.status != http.StatusOK || json.Unmarshal(a.body, &v) != nil {
		e.t.Fatalf("GET /readyz = %d %s, want 200 with the preview figures", a.status, a.body)
	}
	return v.Previews
}

// TestPreviewsNeverTakeRenderSlot: previews have their own pool, and a
// render never waits for one (issue 24: the preview took the one render
// slot, and another tenant's render waited behind it). With one render
// slot and one preview slot: alice's preview draws (held mid-drawing),
// oscar's waits in the preview queue, alice's others are user_limit and
// one more user's is busy (queue of one) — and meanwhile bob's render and
// oscar's own render are admitted at once and answered, while the held
// drawing is still running. Then the previews finish in order.
func TestPreviewsNeverTakeRenderSlot(t *testing.T) {
	hold := newStep()
	defer hold.open()
	e, counted := previewEnvWith(t, jobsOptions{
		admission:    admission.Config{Slots: 1, QueueDepth: 1, PerUser: 1, MaxWait: time.Minute},
		previewSlots: 1,
	}, raster.Config{})
	counted.hold = hold
	alices := e.do(jsonBody(keyAlice, map[string]any{"markdown": longDoc("Alice", 2)}, nil)).view(t, http.StatusAccepted)
	oscars := e.do(jsonBody(keyOscar, map[string]any{"markdown": longDoc("Oscar", 2)}, nil)).view(t, http.StatusAccepted)
	e.waitState(keyAlice, alices.ID, jobs.StateSucceeded)
	e.waitState(keyOscar, oscars.ID, jobs.StateSucceeded)
	if f := e.previews(); f.Slots != 1 {
		t.Fatalf("preview slots = %d, want 1", f.Slots)
	}

	page := func(key, id string, width int) request {
		return request{method: http.MethodGet, path: fmt.Sprintf("/v1/jobs/%s/pages/1.png?width=%d", id, width), key: key}
	}
	answers := make(chan answer, 2)
	go func() { answers <- e.do(page(keyAlice, alices.ID, 100)) }() // ends when hold opens
	hold.await(t, "alice's drawing")
	go func() { answers <- e.do(page(keyOscar, oscars.ID, 100)) }() // ends after alice's
	testenv.Eventually(t, "oscar's preview to wait in the preview queue", func() bool { return e.previews().Queued == 1 })
	// Alice's further previews (other widths: none drawn before) are
	// refused at once, as is a preview with the pool's queue full.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() { // ends with its request
			defer wg.Done()
			e.do(page(keyAlice, alices.ID, 150+50*i)).wantError(t, http.StatusTooManyRequests, limits.CodeUserLimit)
		}()
	}
	wg.Wait()
	bobs := e.do(jsonBody(keyBob, map[string]any{"markdown": longDoc("Bob", 1)}, nil)).view(t, http.StatusAccepted)
	e.waitState(keyBob, bobs.ID, jobs.StateSucceeded)
	e.do(page(keyBob, bobs.ID, 100)).wantError(t, http.StatusTooManyRequests, limits.CodeBusy)

	// Renders meanwhile, by bob and by oscar, whose preview waits: each
	// gets the render slot at once and its PDF, the drawing still held.
	for _, key := range []string{keyBob, keyOscar} {
		r := jsonBody(key, map[string]any{"markdown": longDoc("Render", 1)}, nil)
		r.path = "/v1/render"
		if a := e.do(r); a.status != http.StatusOK || !bytes.HasPrefix(a.body, []byte("%PDF")) {
			t.Errorf("render while the previews hold their pool = %d %.300s, want 200 and a PDF", a.status, a.body)
		}
	}
	if n := counted.drawing(); n != 1 {
		t.Errorf("drawings running after the renders = %d, want alice's, still held", n)
	}
	if st := e.adm.Stats(); st.RefusedQueueFull+st.RefusedMaxWait != 0 {
		t.Errorf("render admission refused busy %d times, want never", st.RefusedQueueFull+st.RefusedMaxWait)
	}

	hold.open()
	for range 2 {
		if a := <-answers; a.status != http.StatusOK || !bytes.HasPrefix(a.body, []byte("\x89PNG")) {
			t.Errorf("held and queued previews = %d %.300s, want 200 PNG", a.status, a.body)
		}
	}
	if f := e.previews(); f.Running != 0 || f.Queued != 0 {
		t.Errorf("preview pool at the end = %+v, want idle", f)
	}
	waitTickets(t, e.adm, 0)
}

// TestPreviewBusyNotCached: a drawing that runs out of wall-clock time
// (it waited for a processor, at its low priority) is 429 busy, and it is
// not remembered as the page's: asking again draws again. A page too
// costly is remembered (TestPreviewRefusalCached).
func TestPreviewBusyNotCached(t *testing.T) {
	e, counted := previewEnv(t, admission.Config{}, raster.Config{Timeout: time.Nanosecond})
	v := e.do(jsonBody(keyAlice, map[string]any{"markdown": longDoc("Busy", 1)}, nil)).view(t, http.StatusAccepted)
	v = e.waitState(keyAlice, v.ID, jobs.StateSucceeded)
	path := "/v1/jobs/" + v.ID + "/pages/1.png?width=200"
	for range 2 {
		a := e.do(request{method: http.MethodGet, path: path, key: keyAlice})
		a.wantError(t, http.StatusTooManyRequests, limits.CodeBusy)
		if a.header.Get("Retry-After") == "" {
			t.Errorf("busy preview without Retry-After")
		}
	}
	if calls, _ := counted.snapshot(); calls != 2 {
		t.Errorf("drawings of a page asked twice while busy = %d, want 2 (nothing remembered)", calls)
	}
}
