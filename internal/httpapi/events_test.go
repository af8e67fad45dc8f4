package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/outline"
	"github.com/outprint/outprint/internal/outline/outlinetest"
	"github.com/outprint/outprint/internal/testenv"
)

// sseEvent is one event of a job event stream.
type sseEvent struct {
	id, name string
	job      jobEvent
}

// sseStream is an open GET /v1/jobs/{id}/events.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
	// comments counts the comment lines (heartbeats) read so far.
	comments int
}

// openEvents opens the event stream of job id as who, resuming after
// lastID when it is not empty. It returns the answer's status and, for a
// 200, the stream.
func (e *jobsEnv) openEvents(who, id, lastID string) (int, *sseStream) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/v1/jobs/"+id+"/events", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	r := as(request{}, who)
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	if r.cookie != "" {
		req.AddCookie(&http.Cookie{Name: outline.CookieName, Value: r.cookie})
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatalf("events of %s: %v", id, err)
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		cancel()
		return resp.StatusCode, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Errorf("events Content-Type = %q, want text/event-stream", ct)
	}
	s := &sseStream{t: e.t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	e.t.Cleanup(s.close)
	return resp.StatusCode, s
}

func (s *sseStream) close() {
	s.cancel()
	_ = s.resp.Body.Close()
}

// next reads the next event; ok is false at the end of the stream.
func (s *sseStream) next() (ev sseEvent, ok bool) {
	s.t.Helper()
	var data string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && data == "" {
				return ev, false
			}
			s.t.Fatalf("read event: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if data == "" {
				continue // the retry: block, or a heartbeat's end
			}
			if err := json.Unmarshal([]byte(data), &ev.job); err != nil {
				s.t.Fatalf("event data %q: %v", data, err)
			}
			return ev, true
		case strings.HasPrefix(line, ":"):
			s.comments++
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// rest reads the stream to its end and returns its events.
func (s *sseStream) rest() []sseEvent {
	s.t.Helper()
	var out []sseEvent
	for {
		ev, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// TestJobEvents follows a queued job through its event stream: its place
// in the queue, heartbeats while nothing changes, a dropped connection
// resumed with Last-Event-ID that still ends with the terminal event, 204
// once the client has that, the per-user bound on streams, tenants.
func TestJobEvents(t *testing.T) {
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			hold := newStep()
			e := newJobsEnv(t, jobsOptions{kind: kind, heartbeat: 50 * time.Millisecond, maxStreams: 2,
				hooks: &hookRenderer{before: hold.wait}})
			first := e.do(jsonBody(keyAlice, map[string]any{"markdown": "# First\n\nHeld.\n"}, nil)).view(t, http.StatusAccepted)
			hold.await(t, "the first render")
			second := e.do(jsonBody(keyBob, map[string]any{"markdown": longDoc("Second", 3)}, nil)).view(t, http.StatusAccepted)

			_, s := e.openEvents(keyBob, second.ID, "")
			ev, ok := s.next()
			if !ok || ev.name != "job" || ev.job.State != jobs.StateQueued || ev.job.QueuePosition != 1 || ev.job.ID != second.ID {
				t.Fatalf("first event = %+v, want job %s queued at position 1", ev, second.ID)
			}
			queuedID := ev.id
			// Nothing changes while the first render is held: only
			// heartbeats arrive.
			for s.comments < 3 {
				line, err := s.r.ReadString('\n')
				if err != nil {
					t.Fatalf("waiting for heartbeats: %v", err)
				}
				if strings.HasPrefix(line, "data:") {
					t.Fatalf("an event while nothing changed: %s", line)
				}
				if strings.HasPrefix(line, ":") {
					s.comments++
				}
			}
			s.close() // the connection drops

			// Two streams per user; a third is refused, and a closed one
			// is given back.
			_, a1 := e.openEvents(keyAlice, first.ID, "")
			_, a2 := e.openEvents(keyAlice, first.ID, "")
			if status, _ := e.openEvents(keyAlice, first.ID, ""); status != http.StatusTooManyRequests {
				t.Errorf("third stream of alice = %d, want 429", status)
			}
			if status, bob := e.openEvents(keyBob, second.ID, ""); status != http.StatusOK {
				t.Errorf("bob's stream while alice has two = %d, want 200", status)
			} else {
				bob.close()
			}
			// Another user of the same tenant learns nothing of alice's
			// job (issue 24): 404 as on GET /v1/jobs/{id}.
			if status, _ := e.openEvents(keyBob, first.ID, ""); status != http.StatusNotFound {
				t.Errorf("bob's stream of alice's job = %d, want 404", status)
			}
			a1.close()
			testenv.Eventually(t, "a stream closed by alice given back", func() bool {
				status, a3 := e.openEvents(keyAlice, first.ID, "")
				if status == http.StatusOK {
					a3.close()
				}
				return status == http.StatusOK
			})
			a2.close()
			if status, _ := e.openEvents(keyOscar, second.ID, ""); status != http.StatusNotFound {
				t.Errorf("another tenant's stream = %d, want 404", status)
			}

			// Resumed after the drop, the stream goes on from the queued
			// snapshot and ends with the terminal event.
			_, s = e.openEvents(keyBob, second.ID, queuedID)
			hold.open()
			evs := s.rest()
			if len(evs) == 0 {
				t.Fatal("resumed stream ended without an event")
			}
			if evs[0].id == queuedID {
				t.Errorf("resumed stream repeated the event the client had (%s)", queuedID)
			}
			last := evs[len(evs)-1]
			if last.job.State != jobs.StateSucceeded || last.job.Progress.Pages < 2 {
				t.Fatalf("last event = %+v, want succeeded with pages", last.job)
			}
			sawRunning := false
			for _, ev := range evs {
				sawRunning = sawRunning || ev.job.State == jobs.StateRunning
			}
			if !sawRunning {
				t.Errorf("events %v, want running before succeeded", evs)
			}
			// A client that has the terminal event is told to stop.
			if status, _ := e.openEvents(keyBob, second.ID, last.id); status != http.StatusNoContent {
				t.Errorf("resume after the terminal event = %d, want 204", status)
			}
			// One that missed it gets it at once.
			_, s = e.openEvents(keyBob, second.ID, queuedID)
			if evs := s.rest(); len(evs) != 1 || evs[0].id != last.id {
				t.Errorf("resume of an ended job = %v, want the terminal event only", evs)
			}
		})
	}
}

// TestJobThumbnails: page thumbnails of a result, at widths rounded to a
// bounded set, cached beside the result and deleted with it.
func TestJobThumbnails(t *testing.T) {
	hold := newStep()
	e := newJobsEnv(t, jobsOptions{kind: "sqlite", web: true,
		hooks: &hookRenderer{after: func(ctx context.Context) { _ = hold.wait(ctx) }}}) // ctx ending ends the render: nothing to report
	v := e.do(jsonBody(keyAlice, map[string]any{"markdown": longDoc("Thumbs", 3)}, nil)).view(t, http.StatusAccepted)
	hold.await(t, "the end of the render")
	e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/pages/1.png", key: keyAlice}).
		wantError(t, http.StatusConflict, CodeResultNotReady)
	hold.open()
	v = e.waitState(keyAlice, v.ID, jobs.StateSucceeded)
	if v.Progress.Pages < 2 {
		t.Fatalf("pages = %d, want several", v.Progress.Pages)
	}
	page := func(path string) answer {
		return e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/pages/" + path, key: keyAlice})
	}
	a := page("2.png?width=120")
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "image/png" {
		t.Fatalf("thumbnail = %d %s: %s", a.status, a.header.Get("Content-Type"), a.body)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(a.body))
	if err != nil || cfg.Width != 150 || cfg.Height < 150 {
		t.Fatalf("thumbnail = %+v (%v), want 150 px wide (120 rounded up), portrait", cfg, err)
	}
	cached := filepath.Join(e.store, "jobs", v.ID, "pages", "2-150.png")
	if _, err := os.Stat(cached); err != nil {
		t.Fatalf("thumbnail not cached beside the result: %v", err)
	}
	// The next request is served from the cache: replace the cached file
	// and see the replacement come back.
	marker := pngImage(t, 7, 7)
	if err := os.WriteFile(cached, marker, 0o600); err != nil {
		t.Fatal(err)
	}
	if a := page("2.png?width=150"); !bytes.Equal(a.body, marker) {
		t.Errorf("second request drew the page again instead of using the cache")
	}
	for path, status := range map[string]int{
		"0.png": http.StatusNotFound, "99.png": http.StatusNotFound, "1.gif": http.StatusNotFound,
		"1.png?width=abc": http.StatusBadRequest, "1.png?width=5000": http.StatusBadRequest,
	} {
		if a := page(path); a.status != status {
			t.Errorf("GET pages/%s = %d, want %d (%s)", path, a.status, status, a.body)
		}
	}
	if a := e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/pages/1.png", key: keyOscar}); a.status != http.StatusNotFound {
		t.Errorf("another tenant's thumbnail = %d, want 404", a.status)
	}
	// Another user of the same tenant: 404 as for the result (issue 24),
	// drawn or not.
	for _, p := range []string{"2.png?width=150", "3.png"} {
		a := e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/pages/" + p, key: keyBob})
		a.wantError(t, http.StatusNotFound, "not_found")
		if bytes.HasPrefix(a.body, []byte("\x89PNG")) {
			t.Errorf("bob got alice's page %s", p)
		}
	}
	// The thumbnails expire with the result.
	e.clock.Advance(v.ExpiresAt.Sub(e.clock.Now()) + time.Second)
	if _, err := e.svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cached); !os.IsNotExist(err) {
		t.Errorf("thumbnail after expiry: %v, want deleted", err)
	}
	page("1.png").wantError(t, http.StatusGone, CodeExpired)
}

// TestOutlineBrowserProgress: an Outline reader's browser that opens
// /render/{id} for a document that takes longer than a second gets the
// progress page, which follows the job and downloads the PDF; the page
// passes axe-core.
func TestOutlineBrowserProgress(t *testing.T) {
	testenv.Require(t, "pdfinfo")
	hold := newStep()
	e := newJobsEnv(t, jobsOptions{kind: "sqlite", outline: true, web: true, hooks: &hookRenderer{before: hold.wait}})
	jane := e.fake.AddUser(outlinetest.User{Name: "Jane Doe", Token: "tok.jane-secret-1"})
	d := e.fake.AddDocument(outlinetest.Document{
		Title: "Travel Policy", Text: "Book trains before planes.\n",
		CreatedBy: outlinetest.Person{ID: jane.ID, Name: jane.Name},
		Access:    map[string]outlinetest.Access{jane.ID: {Read: true, Download: true}},
	})

	// outprint under /outprint/ on the wiki's host, behind a proxy that
	// strips the prefix, as docs/outline.md sets it up: the progress page
	// must find its files and the job routes under the prefix.
	target, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	wiki := httptest.NewServer(http.StripPrefix("/outprint", proxy))
	t.Cleanup(wiki.Close)

	ctx := testenv.Browser(t)
	downloads := t.TempDir()
	testenv.AllowDownloads(t, ctx, downloads)
	setCookie := chromedp.Action[chromedp.Void](func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, network.SetCookie, network.SetCookieParams{Name: outline.CookieName, Value: jane.Token, URL: wiki.URL})
		return chromedp.Void{}, err
	})
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(bctx, setCookie, chromedp.Navigate(wiki.URL+"/outprint/render/"+d.URLID),
		chromedp.WaitVisible(chromedp.CSS("#status"))); err != nil {
		t.Fatalf("open the document: %v", err)
	}
	hold.await(t, "the render")
	title, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#title")))
	if err != nil || !strings.Contains(title, "Travel Policy") {
		t.Errorf("progress page title = %q (%v), want the document's", title, err)
	}
	testenv.Axe(t, bctx, testenv.AxeScript(t, "../.."), "Outline progress page")
	testenv.Screenshot(t, bctx, "outline-progress")
	hold.open()
	pdf := testenv.WaitFile(t, downloads, "*.pdf", time.Minute)
	out, err := exec.Command("pdfinfo", pdf).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Travel Policy") {
		t.Errorf("downloaded %s: pdfinfo %v\n%s", pdf, err, out)
	}
	// curl and other clients that do not ask for HTML keep the
	// synchronous answer.
	a := e.do(request{method: http.MethodGet, path: "/render/" + d.ID, cookie: jane.Token})
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/pdf" {
		t.Errorf("non-browser GET /render = %d %s, want the PDF", a.status, a.header.Get("Content-Type"))
	}
}

// TestOutlineBrowserPageBeforeImages: a browser opening /render/{id} for a
// document whose image Outline's storage holds back gets the progress page
// while the image is still held (issue 25, item 7): the page is read up to
// its card before the test lets the image go. The page then names its job
// at its end, and the job prints the document with the image; in Chromium
// the page follows that job and downloads the PDF. An image that fails
// after the page was sent ends the page with the refusal's message.
func TestOutlineBrowserPageBeforeImages(t *testing.T) {
	testenv.Require(t, "pdfinfo", "pdfimages")
	e := newJobsEnv(t, jobsOptions{kind: "sqlite", outline: true, web: true})
	jane := e.fake.AddUser(outlinetest.User{Name: "Jane Doe", Token: "tok.jane-secret-1"})
	doc := func(hold chan struct{}) outlinetest.Document {
		img := e.fake.AddAttachment(outlinetest.Attachment{Body: pngImage(t, 60, 40), Hold: hold})
		return e.fake.AddDocument(outlinetest.Document{
			Title: "Slow Images", Text: "A map follows.\n\n![Map](" + img + ")\n",
			CreatedBy: outlinetest.Person{ID: jane.ID, Name: jane.Name},
			Access:    map[string]outlinetest.Access{jane.ID: {Read: true, Download: true}},
		})
	}

	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	d := doc(hold)
	req, err := http.NewRequest(http.MethodGet, e.url+"/render/"+d.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	req.AddCookie(&http.Cookie{Name: outline.CookieName, Value: jane.Token})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		release()
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		release()
		t.Fatalf("GET /render with the image held = %d %s, want 200 and the page", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	var sent strings.Builder
	for !strings.Contains(sent.String(), "</main>") {
		line, err := br.ReadString('\n')
		sent.WriteString(line)
		if err != nil {
			release()
			t.Fatalf("page before the image: %v after %q", err, sent.String())
		}
	}
	if s := sent.String(); !strings.Contains(s, "Slow Images") || !strings.Contains(s, "Fetching the document") {
		t.Errorf("page sent while the image is held = %q, want the title and that the images are being fetched", s)
	}
	release() // now the image arrives
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`id="late" data-job="([^"]+)" data-error=""`).FindSubmatch(rest)
	if m == nil {
		t.Fatalf("end of the page = %q, want the late element naming the job", rest)
	}
	v := e.waitState(jane.Token, string(m[1]), jobs.StateSucceeded)
	a := e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/result", cookie: jane.Token})
	if a.status != http.StatusOK {
		t.Fatalf("result = %d: %s", a.status, a.body)
	}
	pdf := filepath.Join(t.TempDir(), "slow.pdf")
	if err := os.WriteFile(pdf, a.body, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("pdfimages", "-list", pdf).CombinedOutput(); err != nil || strings.Count(string(out), "\n") < 3 {
		t.Errorf("pdfimages -list of the result: %v\n%s, want the map", err, out)
	}

	// Storage fails after the page was sent: the page ends with the
	// refusal, and no job.
	hold3 := make(chan struct{})
	release3 := sync.OnceFunc(func() { close(hold3) })
	t.Cleanup(release3)
	img := e.fake.AddAttachment(outlinetest.Attachment{Hold: hold3, StorageStatus: http.StatusInternalServerError})
	broken := e.fake.AddDocument(outlinetest.Document{
		Title: "Broken Image", Text: "![Map](" + img + ")\n",
		CreatedBy: outlinetest.Person{ID: jane.ID, Name: jane.Name},
		Access:    map[string]outlinetest.Access{jane.ID: {Read: true, Download: true}},
	})
	req3, err := http.NewRequest(http.MethodGet, e.url+"/render/"+broken.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	req3.Header.Set("Accept", "text/html")
	req3.AddCookie(&http.Cookie{Name: outline.CookieName, Value: jane.Token})
	resp3, err := http.DefaultClient.Do(req3)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp3.Body.Close() }()
	br3 := bufio.NewReader(resp3.Body)
	for line := ""; !strings.Contains(line, "</main>"); {
		if line, err = br3.ReadString('\n'); err != nil {
			t.Fatalf("page before the failing image: %v", err)
		}
	}
	release3()
	end, err := io.ReadAll(br3)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`id="late" data-job="" data-error="([^"]+)"`).FindSubmatch(end); m == nil || !strings.Contains(string(m[1]), img) {
		t.Errorf("end of the page after the image failed = %q, want no job and the image's problem naming %s", end, img)
	}

	// In Chromium: the page shows while the image is held, and once
	// complete it follows the job it names at its end and downloads the
	// PDF. (page.Navigate returns when the answer starts, chromedp.Navigate
	// only at the page's load, after the image.)
	hold2 := make(chan struct{})
	release2 := sync.OnceFunc(func() { close(hold2) })
	t.Cleanup(release2)
	d2 := doc(hold2)
	ctx := testenv.Browser(t)
	downloads := t.TempDir()
	testenv.AllowDownloads(t, ctx, downloads)
	setCookie := chromedp.Action[chromedp.Void](func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, network.SetCookie, network.SetCookieParams{Name: outline.CookieName, Value: jane.Token, URL: e.url})
		return chromedp.Void{}, err
	})
	open := chromedp.Action[chromedp.Void](func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, page.Navigate, page.NavigateParams{URL: e.url + "/render/" + d2.URLID})
		return chromedp.Void{}, err
	})
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(bctx, setCookie, open, chromedp.WaitVisible(chromedp.CSS("#status"))); err != nil {
		t.Fatalf("open the document: %v", err)
	}
	status, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#status")))
	if err != nil || !strings.Contains(status, "Fetching the document") {
		t.Errorf("status while the image is held = %q (%v), want that the images are being fetched", status, err)
	}
	testenv.Screenshot(t, bctx, "outline-progress-fetching")
	release2()
	got := testenv.WaitFile(t, downloads, "*.pdf", time.Minute)
	if out, err := exec.Command("pdfinfo", got).CombinedOutput(); err != nil || !strings.Contains(string(out), "Slow Images") {
		t.Errorf("downloaded %s: pdfinfo %v\n%s", got, err, out)
	}
}
