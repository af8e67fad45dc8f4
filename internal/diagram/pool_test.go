package diagram

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/testenv"
)

// limitOf reads one limit's soft value from the text of /proc/PID/limits ("Max data
// size", ...).
func limitOf(limits []byte, name string) string {
	for _, l := range strings.Split(string(limits), "\n") {
		if strings.HasPrefix(l, name) {
			f := strings.Fields(strings.TrimPrefix(l, name))
			if len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}

// TestBrowserWalls: every process of a browser's group has the rlimits,
// nice 10, the profile folder's environment and (where the kernel allows
// it, as here) a network namespace of its own; the browser is replaced
// after PagesPerBrowser pages; Close leaves no process and no folder.
func TestBrowserWalls(t *testing.T) {
	tb := setup(t, Config{PagesPerBrowser: 2})
	draw := func(label string) {
		t.Helper()
		if _, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: "graph TD\n " + label + " --> Done", Line: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	draw("First")
	s := tb.d.Stats()
	if len(s.Pids) != 1 {
		t.Fatalf("pids %v, want one browser", s.Pids)
	}
	leader := s.Pids[0]
	members := groupMembers(leader)
	if len(members) < 3 {
		t.Fatalf("group %d has %d processes, want the browser and its helpers", leader, len(members))
	}
	selfNet, _ := os.Readlink("/proc/self/ns/net")
	var dir string
	checked := 0
	for _, pid := range members {
		// Chromium starts and ends helpers as it works: one that ended
		// between the listing and now has no limits left to read.
		limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
		if err != nil {
			continue
		}
		checked++
		if n, err := childproc.NiceOf(pid); err == nil && n < childproc.Nice {
			t.Errorf("process %d has nice %d, want ≥ %d", pid, n, childproc.Nice)
		}
		if got := limitOf(limits, "Max data size"); got != strconv.Itoa(browserDataBytes) {
			t.Errorf("process %d: Max data size %s, want %d", pid, got, browserDataBytes)
		}
		if got := limitOf(limits, "Max core file size"); got != "0" {
			t.Errorf("process %d: core size %s, want 0", pid, got)
		}
		if got := limitOf(limits, "Max cpu time"); got != strconv.Itoa(browserCPUSeconds) {
			t.Errorf("process %d: cpu time %s, want %d", pid, got, browserCPUSeconds)
		}
		if s.Isolated {
			if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && ns == selfNet {
				t.Errorf("process %d shares our network namespace %s", pid, ns)
			}
		}
		// Chromium rewrites its processes' titles: the arguments may be
		// one string joined by spaces.
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		for _, a := range bytes.FieldsFunc(cmdline, func(r rune) bool { return r == 0 || r == ' ' }) {
			if v, ok := bytes.CutPrefix(a, []byte("--user-data-dir=")); ok {
				dir = string(v)
			}
		}
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err == nil && bytes.Contains(environ, []byte("PATH=")) {
			t.Errorf("process %d inherited outprint's environment: %q", pid, environ)
		}
	}
	if checked < 3 {
		t.Errorf("read the limits of %d of the group's processes, want the browser and its helpers", checked)
	}
	if !s.Isolated && os.Getuid() == 0 {
		t.Error("running as root, yet the browser has no network namespace of its own")
	}
	if dir == "" {
		t.Fatal("no --user-data-dir on the browser's command line")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("profile folder: %v", err)
	}

	draw("Second")
	draw("Third") // the first browser served two pages: a new one draws this
	s2 := tb.d.Stats()
	if s2.Started != 2 || s2.Retired != 1 || s2.Crashed != 0 {
		t.Errorf("after 3 documents with PagesPerBrowser 2: %s, want 2 started, 1 retired", s2)
	}
	if alive := groupAlive([]int{leader}); len(alive) > 0 {
		t.Errorf("the retired browser's processes %v are alive", alive)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the retired browser's profile folder %s is still there (%v)", dir, err)
	}
	last := s2.Pids
	if err := tb.d.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if alive := groupAlive(last); len(alive) > 0 {
		t.Errorf("processes %v alive after Close", alive)
	}
}

// TestBrowserCrash: a browser killed from outside while its page waits is
// replaced at the next document, and counted.
func TestBrowserCrash(t *testing.T) {
	tb := setup(t, Config{})
	if _, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: "graph TD\n Before --> Crash", Line: 1}}); err != nil {
		t.Fatal(err)
	}
	s := tb.d.Stats()
	waitIdle(t, tb.d)
	if err := syscall.Kill(s.Pids[0], syscall.SIGKILL); err != nil {
		t.Fatalf("kill the browser %d: %v", s.Pids[0], err)
	}
	drs, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: "graph TD\n After --> Crash", Line: 1}})
	if err != nil {
		t.Fatalf("Draw after a crash = %v", err)
	}
	checkLabels(t, "after crash", pageOf(t, drs[0]), []string{"After", "Crash"})
	if s2 := tb.d.Stats(); s2.Crashed != 1 || s2.Started != 2 {
		t.Errorf("stats after a crash: %s, want 1 crashed and 2 started", s2)
	}
	if alive := groupAlive(s.Pids); len(alive) > 0 {
		t.Errorf("processes %v of the crashed browser are alive", alive)
	}
}

// TestInterception: with the page's policy out of the way (DevTools can
// bypass it), a request the page makes is refused by interception alone
// and reaches no server, without a network namespace.
func TestInterception(t *testing.T) {
	setup(t, Config{noIsolate: true}) // checks the tools
	ms, err := loadMermaid(Config{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	tr := newTrap(t)
	b, err := startBrowser(context.Background(), ms.chromium, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.kill()
	var refused atomic.Int64
	pg, err := preparePage(context.Background(), b, ms.script, &refused)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.close()
	ctx, cancel := context.WithTimeout(pg.ctx, 30*time.Second)
	defer cancel()
	_, err = chromedp.Run(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cdppage.SetBypassCSP, cdppage.SetBypassCSPParams{Enabled: true})
		return err
	}))
	if err != nil {
		t.Fatal(err)
	}
	// A new document for the bypass to apply, then a fetch and an image.
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatal(err)
	}
	res, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch("`+tr.srv.URL+`/fetch").then(() => "fetched", e => "refused: " + e)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res, "refused") {
		t.Errorf("fetch = %q, want it refused", res)
	}
	if n := refused.Load(); n < 1 {
		t.Errorf("interception refused %d requests, want the fetch", n)
	}
	if n := tr.hits.Load(); n != 0 {
		t.Errorf("the trap server saw %d requests", n)
	}
}

// TestConcurrentDocuments: documents drawn at once by more goroutines than
// browsers all get their own page; every slot is given back.
func TestConcurrentDocuments(t *testing.T) {
	tb := setup(t, Config{Browsers: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := fmt.Sprintf("graph TD\n Doc%d --> Page%d", i, i)
			drs, err := tb.d.Draw(tb.ctx, []Diagram{{Kind: Mermaid, Source: src, Line: 1}})
			if err == nil && !bytes.HasPrefix(drs[0].PDF, []byte("%PDF-")) {
				err = fmt.Errorf("document %d: no PDF", i)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	s := tb.d.Stats()
	if s.Pages != 6 || s.Started > 2 || s.Browsers > 2 {
		t.Errorf("stats %s, want 6 pages from at most 2 browsers", s)
	}
}

// TestDocumentsApart: documents follow each other in one warm page, and
// nothing of one reaches the next. A document whose diagram changes
// Mermaid's theme by %%{init}%%, styles its nodes and names a secret
// leaves a page that holds none of it once given back, and the next
// document's diagram prints exactly as on a browser that never saw the
// first (pdftoppm's pixels compared).
func TestDocumentsApart(t *testing.T) {
	testenv.Require(t, "pdftoppm")
	plain := []Diagram{{Kind: Mermaid, Line: 1, Source: "flowchart LR\n  Order[Customer order] --> Check{In stock?}\n  Check -->|yes| Pack[Pack parcel]\n"}}
	fresh := setup(t, Config{CacheBytes: -1})
	want, err := fresh.d.Draw(fresh.ctx, plain)
	if err != nil {
		t.Fatal(err)
	}

	tb := setup(t, Config{CacheBytes: -1})
	first := []Diagram{
		{Kind: Mermaid, Line: 1, Source: "%%{init: {\"theme\": \"dark\", \"flowchart\": {\"curve\": \"step\"}, \"themeVariables\": {\"primaryColor\": \"#ff0000\"}}}%%\n" +
			"flowchart LR\n  Secret[TenantSecret label] --> Other[Second]\n  classDef hot fill:#f00,stroke:#0f0\n  class Secret hot\n"},
		{Kind: Mermaid, Line: 9, Source: "---\nconfig:\n  theme: forest\n---\nsequenceDiagram\n  TenantSecret->>Bob: private words\n"},
	}
	if _, err := tb.d.Draw(tb.ctx, first); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, tb.d)
	pg, err := tb.d.pool.acquire(tb.ctx)
	if err != nil {
		t.Fatal(err)
	}
	dom, err := chromedp.Run(pg.ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	tb.d.pool.release(pg, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dom, "TenantSecret") || strings.Contains(dom, "<svg") || strings.Contains(dom, "@page") {
		t.Errorf("the page given back holds the last document's drawing:\n%s", dom)
	}
	waitIdle(t, tb.d)

	got, err := tb.d.Draw(tb.ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	if s := tb.d.Stats(); s.Started != 1 || s.Pages != 3 {
		t.Errorf("stats %s, want one browser that served three documents", s)
	}
	if text := pdfText(t, pageOf(t, got[0])); strings.Contains(text, "TenantSecret") || strings.Contains(text, "private") {
		t.Errorf("the second document's diagram prints the first's words: %q", text)
	}
	if a, b := pixels(t, pageOf(t, want[0])), pixels(t, pageOf(t, got[0])); !bytes.Equal(a, b) {
		t.Errorf("the diagram after another document prints differently (%d vs %d bytes of pixels) than on a fresh browser", len(b), len(a))
	}
}

// pixels is pdftoppm's rendering of a one-page PDF at 72 dpi, as PPM.
func pixels(t *testing.T, pdf []byte) []byte {
	t.Helper()
	out, err := exec.Command("pdftoppm", "-r", "72", "-singlefile", writeTemp(t, pdf)).Output()
	if err != nil {
		t.Fatalf("pdftoppm: %v", err)
	}
	return out
}
