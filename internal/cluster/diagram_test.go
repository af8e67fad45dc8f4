package cluster

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/diagram"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/testenv"
)

// TestWorkerDrawsDiagrams: a gateway, which has no drawer, passes a
// document with a Mermaid fence through its checks; the worker draws it
// inside its render.
func TestWorkerDrawsDiagrams(t *testing.T) {
	testenv.Require(t, "xelatex", "chromium", "prlimit", "pdftotext")
	if _, err := os.Stat(filepath.Join(diagram.DefaultMermaidDir, "mermaid.min.js")); err != nil {
		testenv.Missing(t, "mermaid is not installed (run scripts/mermaid.sh)")
	}
	d, err := diagram.New(diagram.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() }) // the test is over: nothing to tell
	tb := setupWith(t, true, limits.Render{}, d)

	md := []byte("# Flow\n\n```mermaid\nflowchart LR\n    Gateway --> Worker\n```\n")
	gateway := render.New(render.Config{TempDir: t.TempDir()})
	if _, err := gateway.Check(render.Request{Name: "flow.md", Markdown: md}); err != nil {
		t.Fatalf("the gateway's Check = %v, want the document passed on", err)
	}
	resp, body := tb.post(t, testSecret, bundleJSON(t, Bundle{Name: "flow.md", Markdown: md}))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("worker render = %d %s, want 200", resp.StatusCode, body)
	}
	path := filepath.Join(t.TempDir(), "flow.pdf")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdftotext", path, "-").CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext: %v\n%s", err, out)
	}
	if text := string(out); !strings.Contains(text, "Gateway") || !strings.Contains(text, "Worker") || strings.Contains(text, "-->") {
		t.Errorf("worker's PDF text = %q, want the diagram's labels and not its source", text)
	}
}
