package httpapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/forms"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/metrics"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/worker"
)

// envOptions shape one test server. The zero value is the embedded
// defaults of SPEC §3 and §4, anonymous.
type envOptions struct {
	admission admission.Config // zero fields take the defaults of SPEC §4
	limits    limits.Render    // zero fields take the defaults of SPEC §3
	// keys maps an API key to "user/tenant"; with none the server is
	// anonymous.
	keys map[string]string
	// yaml, when set, is the whole configuration file instead of keys.
	yaml string
	// bodyTimeout is Config.BodyTimeout (0: the default).
	bodyTimeout time.Duration
	// checkBudget is worker.Config.CheckBudget (0: the default).
	checkBudget time.Duration
	// tempDir is Config.TempDir ("": the default).
	tempDir string
	// wrap wraps the real pipeline's Render stage (fault injection,
	// gates); nil renders directly.
	wrap func(Renderer) Renderer
	// office converts Office documents (Config.Office); nil: none.
	office worker.Converter
}

// testEnv is a real server on a loopback port: the real pipeline with real
// XeLaTeX, real admission, real metrics.
type testEnv struct {
	t   testing.TB
	url string
	adm *admission.Controller
	reg *prometheus.Registry
	// logs collects the JSON log lines.
	logs *testenv.Buffer
}

func newEnv(t testing.TB, o envOptions) *testEnv {
	t.Helper()
	testenv.Require(t, "xelatex", "rsvg-convert")
	pl := render.New(render.Config{Engine: testEngine(t), Limits: o.limits, TempDir: t.TempDir()})

	ac := o.admission
	if ac.Slots == 0 {
		ac.Slots = 1
	}
	if ac.PerUser == 0 {
		ac.PerUser = 1
	}
	if ac.MaxWait == 0 {
		ac.MaxWait = time.Minute
	}
	adm := mustAdmission(t, ac)

	cfg := loadConfig(t, o.keys)
	if o.yaml != "" {
		cfg = testenv.LoadConfig(t, o.yaml)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	m.SetAdmissionSource(func() metrics.AdmissionStats {
		st := adm.Stats()
		return metrics.AdmissionStats{Slots: st.Slots, QueueDepth: st.QueueDepth, Running: st.Running, Queued: st.Queued}
	})
	var r Renderer = pl
	if o.wrap != nil {
		r = o.wrap(pl)
	}
	logs := &testenv.Buffer{}
	filler, err := forms.New(forms.Config{Timeout: o.limits.Timeout, MaxPages: o.limits.MaxPages, MaxPDFBytes: o.limits.MaxPDFBytes}, testEngine(t))
	if err != nil {
		t.Fatalf("forms.New: %v", err)
	}
	srv := mustServer(t, Config{
		Capacity:  mustCapacity(t, worker.Config{Pipeline: pl, Renderer: r, Admission: adm, Observer: m, CheckBudget: o.checkBudget}),
		Auth:      cfg,
		Anonymous: cfg.Anonymous(),
		Metrics:   promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Observer:  m,
		Logger:    slog.New(slog.NewJSONHandler(logs, nil)),
		Forms:     filler,
		Office:    o.office,

		BodyTimeout: o.bodyTimeout,
		TempDir:     o.tempDir,
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &testEnv{t: t, url: hs.URL, adm: adm, reg: reg, logs: logs}
}

// loadConfig builds the configuration through config.Load, as serve does:
// keys go into a YAML file as SHA-256 digests.
func loadConfig(t testing.TB, keys map[string]string) *config.Config {
	t.Helper()
	if len(keys) == 0 {
		return testenv.LoadConfig(t, "")
	}
	var b strings.Builder
	b.WriteString("auth:\n  apiKeys:\n")
	for key, who := range keys {
		user, tenant, _ := strings.Cut(who, "/")
		fmt.Fprintf(&b, "    - {user: %s, tenant: %s, sha256: %s}\n", user, tenant, config.KeyDigest(key))
	}
	return testenv.LoadConfig(t, b.String())
}

// answer is one HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error // the request failed (client cancelled, connection error)
}

// problems decodes the error list of SPEC §5.
func (a answer) problems(t *testing.T) []limits.Problem {
	t.Helper()
	var v struct {
		Errors []limits.Problem `json:"errors"`
	}
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("answer %d is not the error list: %v\n%s", a.status, err, a.body)
	}
	return v.Errors
}

// wantError checks status, JSON content type and the code of the first
// problem.
func (a answer) wantError(t *testing.T, status int, code string) []limits.Problem {
	t.Helper()
	if a.err != nil {
		t.Fatalf("request failed: %v", a.err)
	}
	if a.status != status {
		t.Fatalf("status = %d, want %d; body %s", a.status, status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	ps := a.problems(t)
	if len(ps) == 0 {
		t.Fatalf("error list is empty: %s", a.body)
	}
	if ps[0].Code != code {
		t.Errorf("code = %q, want %q; body %s", ps[0].Code, code, a.body)
	}
	return ps
}

// wantPDF checks a 200 PDF answer and returns the PDF.
func (a answer) wantPDF(t *testing.T) []byte {
	t.Helper()
	if a.err != nil {
		t.Fatalf("request failed: %v", a.err)
	}
	if a.status != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/pdf" {
		t.Errorf("Content-Type = %q, want application/pdf", ct)
	}
	if cc := a.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	if !bytes.HasPrefix(a.body, []byte("%PDF-")) {
		t.Fatalf("body is not a PDF: %.40q", a.body)
	}
	return a.body
}

// retryAfter returns the Retry-After header as whole seconds; it fails
// the test when the header is missing or not a positive integer.
func (a answer) retryAfter(t *testing.T) int {
	t.Helper()
	v := a.header.Get("Retry-After")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("Retry-After = %q, want whole seconds ≥ 1", v)
	}
	return n
}

func do(ctx context.Context, req *http.Request) answer {
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return answer{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: body, err: err}
}

// postJSON sends {"markdown","metadata"} to /v1/render. key "" sends no
// Authorization header.
func (e *testEnv) postJSON(ctx context.Context, key, markdown string, metadata any) answer {
	body := map[string]any{"markdown": markdown}
	if metadata != nil {
		body["metadata"] = metadata
	}
	b, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.url+"/v1/render", bytes.NewReader(b))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return do(ctx, req)
}

// asset is one asset part: the path the Markdown uses and the bytes.
type asset struct {
	name string
	data []byte
}

// postMultipart sends a multipart body to /v1/render.
func (e *testEnv) postMultipart(ctx context.Context, key string, document []byte, metadata string, assets ...asset) answer {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	part := func(name, filename, ctype string) io.Writer {
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf(`form-data; name=%q`, name)
		if filename != "" {
			cd += fmt.Sprintf(`; filename=%q`, filename)
		}
		h.Set("Content-Disposition", cd)
		h.Set("Content-Type", ctype)
		w, err := mw.CreatePart(h)
		if err != nil {
			e.t.Fatal(err)
		}
		return w
	}
	// The parts go to buf, a bytes.Buffer: the writes cannot fail.
	_, _ = part("document", "doc.md", "text/markdown").Write(document)
	if metadata != "" {
		_, _ = part("metadata", "", "application/json").Write([]byte(metadata))
	}
	for _, a := range assets {
		_, _ = part("asset", a.name, "application/octet-stream").Write(a.data)
	}
	_ = mw.Close()
	req, err := http.NewRequest(http.MethodPost, e.url+"/v1/render", &buf)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return do(ctx, req)
}

func (e *testEnv) get(ctx context.Context, path string) answer {
	req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return do(ctx, req)
}

// waitFor polls the admission state until cond holds. The bound only stops
// a broken test from hanging; nothing is asserted about time.
func (e *testEnv) waitFor(what string, cond func(admission.Stats) bool) {
	e.t.Helper()
	testenv.Eventually(e.t, what, func() bool { return cond(e.adm.Stats()) })
}

// wantIdle checks that every slot and user count was given back.
func (e *testEnv) wantIdle() {
	e.t.Helper()
	e.waitFor("every slot and count given back", func(st admission.Stats) bool {
		return st.Running == 0 && st.Queued == 0 && st.Tickets == 0 && st.Users == 0
	})
}

// async runs a request in its own goroutine; the answer arrives on the
// returned channel.
func async(f func() answer) <-chan answer {
	ch := make(chan answer, 1)
	go func() { ch <- f() }()
	return ch
}

// gate holds renders at the Render stage until released: the slot is
// taken, the real pipeline has not started. It lets tests make renders
// overlap without depending on how fast TeX is.
type gate struct {
	next    Renderer
	entered chan string // the title of each render that reached the gate
	release chan struct{}
	once    sync.Once
}

func newGate() *gate {
	return &gate{entered: make(chan string, 64), release: make(chan struct{})}
}

func (g *gate) wrap(next Renderer) Renderer { g.next = next; return g }

// open lets every held and later render through.
func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func (g *gate) Render(ctx context.Context, pr *render.Prepared, progress func(render.Progress)) (*render.Result, error) {
	g.entered <- pr.Title()
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.next.Render(ctx, pr, progress)
}

// doc is a small real document titled title.
func doc(title string) string {
	return "# " + title + "\n\nA paragraph of the memo, long enough to be a line of text.\n"
}

// pdfText returns the text of a PDF through pdftotext.
func pdfText(t *testing.T, pdf []byte) string {
	t.Helper()
	testenv.Require(t, "pdftotext")
	path := filepath.Join(t.TempDir(), "out.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdftotext", "-layout", path, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	return string(out)
}

// pdfInfo returns a field of pdfinfo's output ("Pages", "Title").
func pdfInfo(t *testing.T, pdf []byte, field string) string {
	t.Helper()
	testenv.Require(t, "pdfinfo")
	path := filepath.Join(t.TempDir(), "info.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdfinfo", path).Output()
	if err != nil {
		t.Fatalf("pdfinfo: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == field {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// pngImage encodes a small real PNG of w×h pixels.
func pngImage(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(40 * x), 90, uint8(40 * y), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pngChunk returns one PNG chunk with its checksum.
func pngChunk(typ string, data []byte) []byte {
	c := make([]byte, 8, 12+len(data))
	binary.BigEndian.PutUint32(c, uint32(len(data)))
	copy(c[4:], typ)
	c = append(c, data...)
	return binary.BigEndian.AppendUint32(c, crc32.ChecksumIEEE(c[4:]))
}

// paddedPNG is a valid 2×2 PNG grown to about size bytes by a private
// ancillary chunk, which decoders skip: a whole, well-formed image whose
// bytes count against the size limits.
func paddedPNG(t *testing.T, size int) []byte {
	t.Helper()
	p := pngImage(t, 2, 2)
	iend := p[len(p)-12:]
	out := append([]byte{}, p[:len(p)-12]...)
	out = append(out, pngChunk("prVt", make([]byte, max(size-len(p)-12, 0)))...)
	return append(out, iend...)
}

// hugeHeaderPNG is a PNG whose header announces w×h pixels, with a tiny
// body: only the header may be read to refuse it.
func hugeHeaderPNG(t *testing.T, w, h uint32) []byte {
	t.Helper()
	p := pngImage(t, 1, 1)
	ihdr := make([]byte, 13)
	copy(ihdr, p[16:29]) // IHDR data: width, height, depth, color, ...
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	out := append([]byte{}, p[:8]...)
	out = append(out, pngChunk("IHDR", ihdr)...)
	return append(out, p[33:]...)
}

// mustServer is New for a configuration the test knows to be valid.
func mustServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// mustCapacity is worker.New for a configuration the test knows to be
// valid.
func mustCapacity(t testing.TB, cfg worker.Config) *worker.Capacity {
	t.Helper()
	c, err := worker.New(cfg)
	if err != nil {
		t.Fatalf("worker.New: %v", err)
	}
	return c
}

// Renderer is the Render stage tests wrap (gates, fault injection).
type Renderer = worker.Renderer

// mustAdmission is admission.New for bounds the test knows to be valid.
func mustAdmission(t testing.TB, cfg admission.Config) *admission.Controller {
	t.Helper()
	c, err := admission.New(cfg)
	if err != nil {
		t.Fatalf("admission.New: %v", err)
	}
	return c
}
