package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// Browser starts a headless Chromium (Debian's /usr/bin/chromium, installed
// by scripts/setup.sh) for the test and returns a tab's context. The flags
// are those this machine needs: no sandbox as root, and no background
// networking, since every outside connection is refused here. The browser
// is closed when the test ends.
func Browser(t testing.TB) context.Context {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		Missing(t, "chromium is not installed (run scripts/setup.sh)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	// Start the browser now, so a failure is reported here.
	if err := chromedp.Do(ctx); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// AxeScript returns axe-core's script (internal/web/testdata/node_modules,
// installed by scripts/setup.sh with npm ci), for accessibility checks in a
// real browser.
func AxeScript(t testing.TB, moduleRoot string) string {
	t.Helper()
	p := filepath.Join(moduleRoot, "internal", "web", "testdata", "node_modules", "axe-core", "axe.min.js")
	b, err := os.ReadFile(p)
	if err != nil {
		Missing(t, "axe-core is not installed (run scripts/setup.sh): "+err.Error())
	}
	return string(b)
}

// Axe runs axe-core (script, from AxeScript) on the page of ctx and fails
// the test for every serious or critical violation.
func Axe(t testing.TB, ctx context.Context, script, page string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](script)); err != nil {
		t.Fatalf("%s: load axe-core: %v", page, err)
	}
	type node struct {
		Target []any `json:"target"`
	}
	type violation struct {
		ID     string `json:"id"`
		Impact string `json:"impact"`
		Help   string `json:"help"`
		Nodes  []node `json:"nodes"`
	}
	vs, err := chromedp.Run(ctx, chromedp.Evaluate[[]violation](
		`axe.run(document, {resultTypes: ['violations']}).then(r => r.violations)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: axe.run: %v", page, err)
	}
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("%s: accessibility %s (%s): %s, at %v", page, v.ID, v.Impact, v.Help, v.Nodes)
		}
	}
}

// AllowDownloads makes the browser of ctx save downloads in dir.
func AllowDownloads(t testing.TB, ctx context.Context, dir string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Action[chromedp.Void](func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir})
		return chromedp.Void{}, err
	}))
	if err != nil {
		t.Fatalf("allow downloads: %v", err)
	}
}

// WaitFile waits up to d for a complete file matching pattern in dir (a
// download in progress has a .crdownload name) and returns its path.
func WaitFile(t testing.TB, dir, pattern string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		if len(m) > 0 {
			return m[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no file %s in %s after %s", pattern, dir, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Screenshot saves a screenshot of the whole page of ctx as name.png in
// the test's artifact folder (go test -artifacts keeps it) and returns its
// path.
func Screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
