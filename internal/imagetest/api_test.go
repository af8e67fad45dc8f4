package imagetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

// client calls outprint's public API as a user does, with an API key.
type client struct {
	base string // http://127.0.0.1:PORT
	key  string
	http *http.Client
}

func newClient(base, key string) *client {
	return &client{base: base, key: key, http: &http.Client{Timeout: 3 * time.Minute}}
}

// do sends a request and returns the status, the Content-Type and the body.
func (c *client) do(t *testing.T, method, path, contentType string, body []byte) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }() // only read
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), data
}

// part is one part of a multipart body: a file under a field name.
type part struct{ field, filename, path string }

// multipartBody builds a multipart/form-data body of files.
func multipartBody(t *testing.T, parts ...part) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, p := range parts {
		data, err := os.ReadFile(p.path)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := w.CreateFormFile(p.field, p.filename)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.FormDataContentType(), buf.Bytes()
}

// waitReady polls base/readyz until it answers 200.
func waitReady(t *testing.T, base string, limit time.Duration, alive func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	hc := &http.Client{Timeout: 5 * time.Second}
	last := ""
	for time.Now().Before(deadline) {
		if alive != nil {
			if err := alive(); err != nil {
				t.Fatalf("waiting for %s/readyz: %v", base, err)
			}
		}
		resp, err := hc.Get(base + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close() // only read
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s/readyz not ready after %s: %s", base, limit, last)
}

// corpus returns the path of the shared corpus; it is required here.
func corpus(t *testing.T) string {
	t.Helper()
	shared := testenv.SharedDir(t, moduleRoot)
	if shared == "" {
		testenv.Missing(t, "../shared/corpus (the render step renders its handbook)")
	}
	return filepath.Join(shared, "corpus")
}

// renderHandbook renders the corpus's handbook, with its SVG and PNG and an
// emoji (:tada:), and checks the PDF with poppler and qpdf: its text,
// including the SVG's labels and the emoji, embedded fonts only, and the SVG
// and the emoji drawn as vector forms (an emoji printed in Symbola instead
// would be a glyph, and an SVG that failed would be a 422).
func renderHandbook(t *testing.T, c *client) {
	t.Helper()
	dir := corpus(t)
	ct, body := multipartBody(t,
		part{"document", "handbook.md", filepath.Join(dir, "handbook.md")},
		part{"asset", "images/architecture.svg", filepath.Join(dir, "images", "architecture.svg")},
		part{"asset", "images/chart.png", filepath.Join(dir, "images", "chart.png")},
	)
	status, got, pdf := c.do(t, http.MethodPost, "/v1/render", ct, body)
	if status != http.StatusOK || got != "application/pdf" {
		t.Fatalf("POST /v1/render handbook.md = %d %s: %.2000s", status, got, pdf)
	}
	path := writeTemp(t, "handbook.pdf", pdf)
	if n := pdfPages(t, path); n < 3 {
		t.Errorf("handbook.pdf has %d pages, want at least 3", n)
	}
	text := tool(t, "pdftotext", path, "-")
	for _, want := range []string{"Platform Engineering Handbook", "Edge proxy", "Notifications", "🎉"} {
		if !strings.Contains(text, want) {
			t.Errorf("pdftotext handbook.pdf lacks %q", want)
		}
	}
	fontsEmbedded(t, path)
	if n := formXObjects(t, path); n < 2 {
		t.Errorf("handbook.pdf has %d form XObjects, want at least 2 (the SVG and the emoji)", n)
	}
}

// fillForm fills examples/onboarding-form.pdf with its values and checks
// the result: the values in the text, no form left.
func fillForm(t *testing.T, c *client) {
	t.Helper()
	ex := filepath.Join(moduleRoot, "examples")
	ct, body := multipartBody(t,
		part{"pdf", "onboarding-form.pdf", filepath.Join(ex, "onboarding-form.pdf")},
		part{"values", "onboarding-values.json", filepath.Join(ex, "onboarding-values.json")},
	)
	status, got, pdf := c.do(t, http.MethodPost, "/v1/forms/fill", ct, body)
	if status != http.StatusOK || got != "application/pdf" {
		t.Fatalf("POST /v1/forms/fill onboarding-form.pdf = %d %s: %.2000s", status, got, pdf)
	}
	path := writeTemp(t, "filled.pdf", pdf)
	text := tool(t, "pdftotext", path, "-")
	for _, want := range []string{"Zoë Müller", "東京 (Tokyo)", "A1234567"} {
		if !strings.Contains(text, want) {
			t.Errorf("pdftotext filled.pdf lacks %q:\n%s", want, text)
		}
	}
	if info := tool(t, "pdfinfo", path); !regexp.MustCompile(`(?m)^Form:\s+none$`).MatchString(info) {
		t.Errorf("pdfinfo filled.pdf: want Form: none (flattened)\n%s", info)
	}
	fontsEmbedded(t, path)
}

// job is the part of GET /v1/jobs/{id} the tests read.
type job struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// runJob submits a Markdown job, waits for it to succeed and checks its
// result; it returns the job's id.
func runJob(t *testing.T, c *client, title string) string {
	t.Helper()
	doc, _ := json.Marshal(map[string]any{"markdown": "# " + title + "\n\nA job, rendered in a container.\n\n" +
		strings.Repeat("A paragraph that fills the page. ", 40)})
	status, _, body := c.do(t, http.MethodPost, "/v1/jobs", "application/json", doc)
	var j job
	if status != http.StatusAccepted || json.Unmarshal(body, &j) != nil || j.ID == "" {
		t.Fatalf("POST /v1/jobs = %d %s, want 202 and a job", status, body)
	}
	deadline := time.Now().Add(4 * time.Minute)
	for j.State != "succeeded" {
		if j.State == "failed" || j.State == "cancelled" || time.Now().After(deadline) {
			t.Fatalf("job %s ended %s (or took too long): %+v", j.ID, j.State, j.Error)
		}
		time.Sleep(500 * time.Millisecond)
		status, _, body = c.do(t, http.MethodGet, "/v1/jobs/"+j.ID, "", nil)
		if status != http.StatusOK || json.Unmarshal(body, &j) != nil {
			t.Fatalf("GET /v1/jobs/%s = %d %s", j.ID, status, body)
		}
	}
	status, got, pdf := c.do(t, http.MethodGet, "/v1/jobs/"+j.ID+"/result", "", nil)
	if status != http.StatusOK || got != "application/pdf" {
		t.Fatalf("GET /v1/jobs/%s/result = %d %s: %.500s", j.ID, status, got, pdf)
	}
	path := writeTemp(t, "job.pdf", pdf)
	if text := tool(t, "pdftotext", path, "-"); !strings.Contains(text, title) {
		t.Errorf("the job's PDF lacks its title %q:\n%s", title, text)
	}
	return j.ID
}

// preview fetches page 1 of a job's result as a PNG 300 pixels wide.
func preview(t *testing.T, c *client, id string) {
	t.Helper()
	status, got, data := c.do(t, http.MethodGet, "/v1/jobs/"+id+"/pages/1.png?width=300", "", nil)
	if status != http.StatusOK || got != "image/png" {
		t.Fatalf("GET /v1/jobs/%s/pages/1.png = %d %s: %.500s", id, status, got, data)
	}
	m, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the page preview is no PNG: %v", err)
	}
	if w := m.Bounds().Dx(); w != 300 {
		t.Errorf("the page preview is %d pixels wide, want 300", w)
	}
}

// writeTemp writes data into the test's temporary folder.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tool runs a checking program and returns its standard output.
func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

// pdfPages is pdfinfo's page count.
func pdfPages(t *testing.T, path string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^Pages:\s+([0-9]+)$`).FindStringSubmatch(tool(t, "pdfinfo", path))
	if m == nil {
		t.Fatalf("pdfinfo %s: no page count", path)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// fontsEmbedded fails when pdffonts lists a font that is not embedded.
func fontsEmbedded(t *testing.T, path string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(tool(t, "pdffonts", path)), "\n")
	if len(lines) < 3 {
		t.Errorf("pdffonts %s lists no font", path)
		return
	}
	for _, l := range lines[2:] {
		// name type encoding emb sub uni object ID: emb is the fourth
		// column from the end.
		f := strings.Fields(l)
		if len(f) < 7 || f[len(f)-5] != "yes" {
			t.Errorf("pdffonts %s: not embedded: %s", path, l)
		}
	}
}

// formXObjects counts the form XObjects of a PDF (vector images: an SVG or
// an emoji converted by rsvg-convert), read by qpdf in QDF mode, which
// writes every dictionary in the clear.
func formXObjects(t *testing.T, path string) int {
	t.Helper()
	out, err := exec.Command("qpdf", "--qdf", "--object-streams=disable", path, "-").Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 3) {
		t.Fatalf("qpdf --qdf %s: %v", path, err)
	}
	return len(regexp.MustCompile(`/Subtype /Form\b`).FindAll(out, -1))
}
