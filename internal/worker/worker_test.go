package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/testenv"
)

// TestCheckSlots: cheap checks leave one Go processor to the rest of the
// server (accepting, /healthz, refusals), and never have none.
func TestCheckSlots(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ procs, want int }{{1, 1}, {2, 1}, {3, 2}, {8, 7}, {64, 63}} {
		if got := checkSlots(tt.procs); got != tt.want {
			t.Errorf("checkSlots(%d) = %d, want %d", tt.procs, got, tt.want)
		}
	}
}

// recorder is an Observer that keeps what it was told.
type recorder struct {
	mu      sync.Mutex
	refused []string
	renders []string
	waits   int
	memory  []int64
	// conversions are "format result" of each Office conversion.
	conversions []string
}

func (r *recorder) Refused(code string) {
	r.mu.Lock()
	r.refused = append(r.refused, code)
	r.mu.Unlock()
}
func (r *recorder) ObserveQueueWait(time.Duration) {
	r.mu.Lock()
	r.waits++
	r.mu.Unlock()
}
func (r *recorder) ObserveRender(_ time.Duration, result string) {
	r.mu.Lock()
	r.renders = append(r.renders, result)
	r.mu.Unlock()
}
func (r *recorder) ObserveRenderMemory(b int64) {
	r.mu.Lock()
	r.memory = append(r.memory, b)
	r.mu.Unlock()
}
func (r *recorder) ObserveConversion(format, result string, _ time.Duration) {
	r.mu.Lock()
	r.conversions = append(r.conversions, format+" "+result)
	r.mu.Unlock()
}
func (r *recorder) ObserveConversionQueue(time.Duration) {}

// fakeRenderer renders a "PDF" of the title, or fails with err.
type fakeRenderer struct{ err error }

func (f fakeRenderer) Render(_ context.Context, pr *render.Prepared, _ func(render.Progress)) (*render.Result, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &render.Result{PDF: []byte("%PDF " + pr.Title()), Title: pr.Title(), MaxRSS: 4096}, nil
}

// testBundle is a Capacity of one slot and one request per user on a
// pipeline without TeX, and what it tells.
type testBundle struct {
	cap *Capacity
	adm *admission.Controller
	obs *recorder
}

func setup(t *testing.T, cfg Config) *testBundle {
	t.Helper()
	adm, err := admission.New(admission.Config{Slots: 1, QueueDepth: 1, PerUser: 1, MaxWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tb := &testBundle{adm: adm, obs: &recorder{}}
	if cfg.Pipeline == nil {
		cfg.Pipeline = render.New(render.Config{TempDir: t.TempDir()})
	}
	if cfg.Renderer == nil {
		cfg.Renderer = fakeRenderer{}
	}
	cfg.Admission, cfg.Observer = adm, tb.obs
	tb.cap, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestTicketOrder: Enter counts the user (a second request of the same
// user is refused user_limit), Check and Render run the rest of SPEC §4,
// and Done gives everything back once, however often it is called.
func TestTicketOrder(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{})
	ctx := context.Background()
	tk, err := tb.cap.Enter("acme\x00alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.cap.Enter("acme\x00alice"); !isRefusal(err, limits.CodeUserLimit) {
		t.Errorf("a second Enter of the same user = %v, want user_limit", err)
	}
	checked, err := tk.Check(ctx, render.Request{Name: "m.md", Markdown: []byte("# Memo\n")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tk.Render(ctx, checked)
	if err != nil || string(res.PDF) != "%PDF Memo" {
		t.Fatalf("Render = %v, %v, want the fake PDF", res, err)
	}
	tk.Done()
	tk.Done()
	if st := tb.adm.Stats(); st.Tickets != 0 || st.Running != 0 || st.Users != 0 {
		t.Errorf("admission after Done twice = %+v, want idle", st)
	}
	if len(tb.obs.renders) != 1 || tb.obs.renders[0] != "ok" || tb.obs.waits != 1 || len(tb.obs.memory) != 1 {
		t.Errorf("observed renders %v, waits %d, memory %v, want one ok render, one wait, its memory", tb.obs.renders, tb.obs.waits, tb.obs.memory)
	}
	if len(tb.obs.refused) != 1 || tb.obs.refused[0] != limits.CodeUserLimit {
		t.Errorf("observed refusals %v, want [user_limit]", tb.obs.refused)
	}
}

// TestTicketDocumentError: a document's problem found by Check or at Render is
// the *limits.Error, recorded under its code; nothing is left held.
func TestTicketDocumentError(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{Renderer: fakeRenderer{err: limits.TooManyPages(500)}})
	ctx := context.Background()
	tk, err := tb.cap.Enter("u")
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Done()
	var le *limits.Error
	// A formula's problem is the document's: Check keeps it for Fetch,
	// which reports it with the images' (every problem at once).
	bad, err := tk.Check(ctx, render.Request{Name: "m.md", Markdown: []byte("$\\frac{1$\n")})
	if err != nil {
		t.Fatalf("Check(bad math) = %v, want the problem kept for Fetch", err)
	}
	if err := bad.Err(); !errors.As(err, &le) || le.Code() != limits.CodeMath {
		t.Errorf("Check(bad math).Err() = %v, want a math error", err)
	}
	checked, err := tk.Check(ctx, render.Request{Name: "m.md", Markdown: []byte("# M\n")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Render(ctx, checked); !errors.As(err, &le) || le.Code() != limits.CodeTooManyPages {
		t.Errorf("Render = %v, want too_many_pages", err)
	}
	tk.Done()
	if st := tb.adm.Stats(); st.Tickets != 0 || st.Running != 0 {
		t.Errorf("admission after a failed render = %+v, want idle", st)
	}
	if got := strings.Join(tb.obs.renders, ","); got != limits.CodeTooManyPages {
		t.Errorf("observed renders = %s, want %s", got, limits.CodeTooManyPages)
	}
}

// TestCheckOutlivesBudget: a check past its budget is answered 413
// resource at once, and the ticket stays counted until the parse returns:
// Done by the caller gives nothing back early.
func TestCheckOutlivesBudget(t *testing.T) {
	t.Parallel()
	tb := setup(t, Config{CheckBudget: time.Nanosecond})
	// Some 930 KB: under the 1 MiB Markdown limit, so that only the budget
	// refuses it (20,000 items were 1.24 MB, and the size check could
	// answer first).
	var b strings.Builder
	for i := range 15_000 {
		b.WriteString("- item with *some* `code` and [a link](https://example.com/x)\n")
		_ = i
	}
	tk, err := tb.cap.Enter("u")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tk.Check(context.Background(), render.Request{Name: "m.md", Markdown: []byte(b.String())})
	var le *limits.Error
	if !errors.As(err, &le) || le.Code() != limits.CodeResource {
		t.Fatalf("Check past its budget = %v, want resource", err)
	}
	tk.Done()
	// The check goroutine gives the ticket back when the parse ends.
	testenv.Eventually(t, "the abandoned check to give its ticket back", func() bool { return tb.adm.Stats().Tickets == 0 })
}

func isRefusal(err error, code string) bool {
	var ref *admission.Refusal
	return errors.As(err, &ref) && ref.Code == code
}

// TestNewRefusesMissingParts: a capacity without its pipeline or
// admission is a wiring error New returns, not a panic.
func TestNewRefusesMissingParts(t *testing.T) {
	t.Parallel()
	if c, err := New(Config{}); err == nil || c != nil {
		t.Errorf("New(Config{}) = %v, %v, want an error", c, err)
	}
}
