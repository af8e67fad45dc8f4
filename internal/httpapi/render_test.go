package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// TestRenderMultipartWithImage: a document, its metadata and an image
// asset named by the path the Markdown uses become a PDF with the image,
// named after the title, never cached.
func TestRenderMultipartWithImage(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "pdfimages")
	e := newEnv(t, envOptions{})
	md := "# Ignored heading\n\nThe chart below shows the quarter.\n\n![Sales chart](img/chart.png)\n"
	meta := `{"title": "Quarterly report: Q3/Ü", "author": "Ann Example"}`
	a := e.postMultipart(context.Background(), "", []byte(md), meta, asset{"img/chart.png", pngImage(t, 40, 30)})
	pdf := a.wantPDF(t)
	want := `attachment; filename="Quarterly report_ Q3__.pdf"; filename*=UTF-8''Quarterly%20report%3A%20Q3%2F%C3%9C.pdf`
	if cd := a.header.Get("Content-Disposition"); cd != want {
		t.Errorf("Content-Disposition = %s, want %s", cd, want)
	}
	if got := pdfInfo(t, pdf, "Title"); got != "Quarterly report: Q3/Ü" {
		t.Errorf("pdfinfo Title = %q", got)
	}
	if got := pdfInfo(t, pdf, "Author"); got != "Ann Example" {
		t.Errorf("pdfinfo Author = %q", got)
	}
	if text := pdfText(t, pdf); !strings.Contains(text, "shows the quarter") {
		t.Errorf("pdftotext lacks the paragraph:\n%s", text)
	}
	path := filepath.Join(t.TempDir(), "img.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdfimages", "-list", path).Output()
	if err != nil {
		t.Fatalf("pdfimages: %v", err)
	}
	if !strings.Contains(string(out), "   40    30 ") {
		t.Errorf("pdfimages -list has no 40×30 image:\n%s", out)
	}
	if id := a.header.Get("X-Request-Id"); len(id) != 16 || !strings.Contains(e.logs.String(), `"request_id":"`+id+`"`) {
		t.Errorf("request id %q is not in the logs", id)
	}
}

// TestAuth: with API keys configured a request needs one; the key's user
// is what admission counts, and nothing else the client sends.
func TestAuth(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t, envOptions{
		admission: admission.Config{Slots: 1, QueueDepth: 2, PerUser: 1},
		keys:      users, wrap: g.wrap,
	})
	defer g.open()
	ctx := context.Background()
	send := func(ctx context.Context, header, user string) answer {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/render", strings.NewReader(`{"markdown": "# Auth\n\ntext\n"}`))
		req.Header.Set("Content-Type", "application/json")
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		// Headers a client might hope to be counted by; they must change
		// nothing.
		req.Header.Set("X-User-Id", user)
		req.Header.Set("X-Forwarded-For", "203.0.113.7")
		return do(ctx, req)
	}
	for _, tc := range []struct{ name, header string }{
		{"no key", ""},
		{"unknown key", "Bearer not-a-key"},
		{"empty bearer", "Bearer "},
		{"basic scheme", "Basic a2V5LWFubjo="},
		{"key without scheme", "key-ann"},
	} {
		a := send(ctx, tc.header, "ann")
		a.wantError(t, http.StatusUnauthorized, httperr.CodeUnauthorized)
		if a.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
		}
	}
	e.wantIdle()

	annCtx, annLeave := context.WithCancel(ctx)
	ann := async(func() answer { return send(annCtx, "Bearer key-ann", "bob") })
	<-g.entered
	// Same key, another claimed user: still ann.
	send(ctx, "bearer key-ann", "someone-else").wantError(t, http.StatusTooManyRequests, limits.CodeUserLimit)
	// Another key, ann's claimed identity: counted as bob, queued.
	bob := async(func() answer { return send(ctx, "Bearer key-bob", "ann") })
	e.waitFor("bob queued", func(st admission.Stats) bool { return st.Queued == 1 && st.Users == 2 })
	annLeave()
	if a := <-ann; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("ann's request = %d %v, want her own cancellation", a.status, a.err)
	}
	g.open()
	(<-bob).wantPDF(t)
	if !strings.Contains(e.logs.String(), `"user":"bob","tenant":"acme"`) {
		t.Errorf("the render is not logged with the key's user and tenant")
	}
	e.wantIdle()
}

// TestAnonymous: with nothing configured requests are user "local"; with
// Outline configured (no keys) there is no anonymous mode.
func TestAnonymous(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t, envOptions{admission: admission.Config{Slots: 2, QueueDepth: 1, PerUser: 1}, wrap: g.wrap})
	defer g.open()
	if cfg := loadConfig(t, nil); !cfg.Anonymous() {
		t.Fatalf("embedded defaults are not anonymous")
	}
	ctx, leave := context.WithCancel(context.Background())
	first := async(func() answer { return e.postJSON(ctx, "", doc("Anonymous"), nil) })
	<-g.entered
	// Every anonymous request is the same user.
	e.postJSON(context.Background(), "", doc("Again"), nil).wantError(t, http.StatusTooManyRequests, limits.CodeUserLimit)
	// A key sent to an anonymous server is checked, not ignored.
	e.postJSON(context.Background(), "some-key", doc("Keyed"), nil).wantError(t, http.StatusUnauthorized, httperr.CodeUnauthorized)
	leave()
	<-first
	e.wantIdle()

	// Outline configured, no API keys: not anonymous, so no credentials
	// is a 401 (Outline readers use /render/{id} with their cookie).
	o := newEnv(t, envOptions{yaml: "outline:\n  url: https://wiki.example.com\n"})
	o.postJSON(context.Background(), "", doc("Outline"), nil).wantError(t, http.StatusUnauthorized, httperr.CodeUnauthorized)
}

// TestContentDisposition: the file name comes from the title, and no
// title can break out of the header value.
func TestContentDisposition(t *testing.T) {
	cases := []struct{ title, want string }{
		{"Memo", `attachment; filename="Memo.pdf"`},
		{"Report (v2), final", `attachment; filename="Report (v2), final.pdf"`},
		{"Café", `attachment; filename="Caf_.pdf"; filename*=UTF-8''Caf%C3%A9.pdf`},
		{`a"; filename="evil.exe`, `attachment; filename="a__ filename__evil.exe.pdf"; filename*=UTF-8''a%22%3B%20filename%3D%22evil.exe.pdf`},
		{"line\r\nX-Injected: 1", `attachment; filename="lineX-Injected_ 1.pdf"; filename*=UTF-8''lineX-Injected%3A%201.pdf`},
		{"日本語", `attachment; filename="document.pdf"; filename*=UTF-8''%E6%97%A5%E6%9C%AC%E8%AA%9E.pdf`},
		{"..", `attachment; filename="document.pdf"; filename*=UTF-8''...pdf`},
	}
	for _, tc := range cases {
		if got := contentDisposition(tc.title); got != tc.want {
			t.Errorf("contentDisposition(%q) = %s, want %s", tc.title, got, tc.want)
		}
	}
}

// TestErrorAnswer: the one mapping from errors to statuses and codes.
func TestErrorAnswer(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
		code   string
		retry  int
	}{
		{"busy", &admission.Refusal{Code: limits.CodeBusy, RetryAfter: 3 * time.Second}, 429, limits.CodeBusy, 3},
		{"user limit", &admission.Refusal{Code: limits.CodeUserLimit, RetryAfter: 1500 * time.Millisecond}, 429, limits.CodeUserLimit, 2},
		{"wrapped limits error", fmt.Errorf("render: %w", limits.TooManyPages(500)), 413, limits.CodeTooManyPages, 0},
		{"timeout", limits.Timeout(time.Minute), 504, limits.CodeTimeout, 0},
		{"closed", fmt.Errorf("acquire: %w", admission.ErrClosed), 503, httperr.CodeShuttingDown, 1},
		{"not ready", httperr.NotReady(errors.New("xelatex missing")), 503, httperr.CodeNotReady, 1},
		{"no key", errNoCredentials, 401, httperr.CodeUnauthorized, 0},
		{"bad request", httperr.BadRequest("markdown", "markdown is required"), 400, limits.CodeInvalid, 0},
		{"body too big", errRequestTooBig, 413, limits.CodeTooLarge, 0},
		{"internal", errors.New("open /var/secret: permission denied"), 500, limits.CodeInternal, 0},
	}
	for _, tc := range cases {
		status, problems, retry := errorAnswer(tc.err)
		if status != tc.status || len(problems) == 0 || problems[0].Code != tc.code || retry != tc.retry {
			t.Errorf("errorAnswer(%s) = %d %+v %d, want %d %s %d", tc.name, status, problems, retry, tc.status, tc.code, tc.retry)
		}
		for _, p := range problems {
			if strings.Contains(p.Message, "/var/secret") || strings.Contains(p.Message, "xelatex missing") {
				t.Errorf("errorAnswer(%s) leaks internal text: %q", tc.name, p.Message)
			}
		}
	}
}
