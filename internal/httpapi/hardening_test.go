package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// The bounds of issue 10 around the pipeline (guard.go).

// rawRequest opens a connection to the server, sends a request head that
// announces a body of length bytes and the first bytes of it only, and
// returns the connection with a reader on it. The rest of the body is
// never sent: a slowloris.
func rawRequest(t *testing.T, serverURL, head string) (net.Conn, *bufio.Reader) {
	t.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	// A bound for the test only, far above what an answer takes: without
	// the fix the server waits for the body and this read times out.
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	return conn, bufio.NewReader(conn)
}

// wantClosedAfter reads one answer from br, checks its status, and checks
// that the server then closes the connection (EOF, not a timeout).
func wantClosedAfter(t *testing.T, br *bufio.Reader, status int) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while the body was held back: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != status {
		t.Errorf("status = %d, want %d", resp.StatusCode, status)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer: %v, want the connection closed (EOF)", err)
	}
}

// TestUnauthenticatedBodyNotRead: a POST without a key that announces a
// 200,000-byte body and sends 10 bytes of it is answered 401 at once and
// its connection closed; the server does not wait for the body (issue 10:
// 20 of 20 such connections were still open after 150 s).
func TestUnauthenticatedBodyNotRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{keys: users})
	_, br := rawRequest(t, e.url, "POST /v1/render HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{\"markdow")
	wantClosedAfter(t, br, http.StatusUnauthorized)
}

// TestUserCountedBeforeBody: a user whose first request is still uploading
// is refused a second one with 429 user_limit before its body is read (and
// the connection closed), so one user cannot hold many uploads, checks or
// fetches at once.
func TestUserCountedBeforeBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{keys: users, admission: admission.Config{Slots: 2, QueueDepth: 2, PerUser: 1}})
	_, br := rawRequest(t, e.url, "POST /v1/render HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-ann\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"markdown\": \"# Slow")
	e.waitFor("the slow upload to be counted", func(st admission.Stats) bool { return st.Tickets == 1 })
	a := e.postJSON(context.Background(), "key-ann", doc("Second"), nil)
	a.wantError(t, http.StatusTooManyRequests, limits.CodeUserLimit)
	a.retryAfter(t)
	// Another user is not held back by ann.
	e.postJSON(context.Background(), "key-bob", doc("Bob's"), nil).wantPDF(t)
	// And ann's second request with a body held back is not read either.
	_, br2 := rawRequest(t, e.url, "POST /v1/render HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-ann\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"markdown\": \"# Slow")
	wantClosedAfter(t, br2, http.StatusTooManyRequests)
	_ = br
}

// TestAdmissionKeyIsTenantAndUser: alice of tenant acme and alice of tenant
// beta are two people; one's render does not count against the other
// (issue 10: beta/alice got user_limit while acme/alice rendered).
func TestAdmissionKeyIsTenantAndUser(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t, envOptions{
		keys:      map[string]string{"key-acme": "alice/acme", "key-beta": "alice/beta"},
		admission: admission.Config{Slots: 2, QueueDepth: 1, PerUser: 1},
		wrap:      g.wrap,
	})
	defer g.open()
	ctx := context.Background()
	first := async(func() answer { return e.postJSON(ctx, "key-acme", doc("Acme"), nil) })
	<-g.entered
	second := async(func() answer { return e.postJSON(ctx, "key-beta", doc("Beta"), nil) })
	<-g.entered // beta/alice reached the render too: not refused
	g.open()
	(<-first).wantPDF(t)
	(<-second).wantPDF(t)
}

// TestContentDispositionLong: a 500 KB first heading names the file with
// at most 200 characters (issue 10: it became a 500 KB header), in both
// the ASCII name and the RFC 6266 filename*.
func TestContentDispositionLong(t *testing.T) {
	for _, title := range []string{strings.Repeat("a", 500_000), strings.Repeat("é", 250_000), strings.Repeat("x ", 150) + "end"} {
		got := contentDisposition(title)
		_, params, err := mimeParams(got)
		if err != nil {
			t.Fatalf("contentDisposition(%.20q…) = %.80s…, not a valid header: %v", title, got, err)
		}
		name := params["filename"]
		if n := len([]rune(strings.TrimSuffix(name, ".pdf"))); n == 0 || n > maxFileNameRunes {
			t.Errorf("contentDisposition(%.20q…) filename has %d characters, want 1 to %d", title, n, maxFileNameRunes)
		}
		if len(got) > 200*12+100 {
			t.Errorf("contentDisposition(%.20q…) is %d bytes long", title, len(got))
		}
		if strings.ContainsRune(title, 'é') && !strings.Contains(got, "filename*=UTF-8''") {
			t.Errorf("contentDisposition(%.20q…) = %.80s…, want a filename* for the non-ASCII name", title, got)
		}
	}
	// The header goes out whole on a real answer.
	t.Run("render", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, envOptions{})
		a := e.postJSON(context.Background(), "", "# "+strings.Repeat("Long title ", 50_000)+"\n\nText.\n", nil)
		a.wantPDF(t)
		if cd := a.header.Get("Content-Disposition"); len(cd) > 1000 || !strings.Contains(cd, "Long title") {
			t.Errorf("Content-Disposition = %d bytes %.80q…, want the title cut to %d characters", len(cd), cd, maxFileNameRunes)
		}
	})
}

// TestContentDispositionBidi: bidirectional controls (U+202E and the
// others) leave the file name, so that no name shows differently from
// what it is; other letters stay.
func TestContentDispositionBidi(t *testing.T) {
	for _, tc := range []struct{ title, want string }{
		{"invoice\u202efdp.exe", "invoicefdp.exe.pdf"},
		{"a\u200fb\u2066c\u2069d\u061ce\u200ef\u202ag\u202ch i", "abcdefghi.pdf"},
		{"Grüße שלום", "Grüße שלום.pdf"},
	} {
		_, params, err := mimeParams(contentDisposition(tc.title))
		if err != nil {
			t.Fatalf("contentDisposition(%q): %v", tc.title, err)
		}
		if got := params["filename"]; got != tc.want {
			t.Errorf("contentDisposition(%q) filename* = %q, want %q", tc.title, got, tc.want)
		}
	}
}

// TestCheckBudget: cheap checks that outlast their budget are answered 413
// resource, and the user stays counted until the check has really ended
// (it cannot be interrupted), then is free again.
func TestCheckBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{checkBudget: time.Nanosecond})
	var b strings.Builder
	for i := range 8_000 {
		fmt.Fprintf(&b, "- item %d with *some* `code` and [a link](https://example.com/%d)\n", i, i)
	}
	a := e.postJSON(context.Background(), "", b.String(), nil)
	ps := a.wantError(t, http.StatusRequestEntityTooLarge, limits.CodeResource)
	if !strings.Contains(ps[0].Message, "to read") {
		t.Errorf("message = %q, want it to name the check", ps[0].Message)
	}
	e.waitFor("the abandoned check to give the user back", func(st admission.Stats) bool { return st.Tickets == 0 })
}

// mimeParams parses a Content-Disposition value.
func mimeParams(v string) (string, map[string]string, error) { return mime.ParseMediaType(v) }

// TestJobAcceptanceCounted: POST /v1/jobs counts its caller while it
// reads, checks, fetches and stores (issue 10: acceptance had no
// admission), and an unauthenticated one is not read.
func TestJobAcceptanceCounted(t *testing.T) {
	t.Parallel()
	e := newJobsEnv(t, jobsOptions{kind: "sqlite"})
	_, br := rawRequest(t, e.url, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n{\"markdow")
	wantClosedAfter(t, br, http.StatusUnauthorized)

	// alice's first submission is still uploading: her second is refused
	// before its body is read; bob, of the same tenant, is not held back.
	_, _ = rawRequest(t, e.url, "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+keyAlice+
		"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"markdown\": \"# Slow")
	waitTickets(t, e.adm, 1)
	a := e.do(jsonBody(keyAlice, map[string]any{"markdown": "# Second\n"}, nil))
	a.wantError(t, http.StatusTooManyRequests, limits.CodeUserLimit)
	e.do(jsonBody(keyBob, map[string]any{"markdown": "# Bob\n"}, nil)).view(t, http.StatusAccepted)
}

// waitTickets waits until admission counts n requests.
func waitTickets(t *testing.T, adm *admission.Controller, n int) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d admission tickets", n), func() bool { return adm.Stats().Tickets == n })
}

// TestJobQuotas: a tenant at jobs.maxQueuedPerTenant is refused 429 quota
// with Retry-After, one at jobs.maxStoredBytesPerTenant 507 quota; another
// tenant is not affected (issue 10: six jobs put 301 MB on disk in 4 s).
func TestJobQuotas(t *testing.T) {
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			hold := newStep()
			e := newJobsEnv(t, jobsOptions{kind: kind, maxQueued: 1, maxStored: 64 << 10,
				hooks: &hookRenderer{before: hold.wait}})
			defer hold.open()
			first := e.do(jsonBody(keyAlice, map[string]any{"markdown": "# One\n"}, nil)).view(t, http.StatusAccepted)
			hold.await(t, "the first job's render")
			// One job queued or running: the tenant's next is refused,
			// whoever sends it.
			a := e.do(jsonBody(keyBob, map[string]any{"markdown": "# Two\n"}, nil))
			ps := a.wantError(t, http.StatusTooManyRequests, CodeQuota)
			a.retryAfter(t)
			if !strings.Contains(ps[0].Message, "jobs.maxQueuedPerTenant") {
				t.Errorf("message = %q, want it to name the setting", ps[0].Message)
			}
			// Another tenant is not.
			e.do(jsonBody(keyOscar, map[string]any{"markdown": "# Other\n"}, nil)).view(t, http.StatusAccepted)
			hold.open()
			e.waitState(keyAlice, first.ID, "succeeded")

			// Stored bytes: the first job's input and PDF are kept; a
			// document that would pass 64 KiB with them is refused 507.
			big := "# Big\n\n" + strings.Repeat("word ", 12_000) + "\n"
			a = e.do(jsonBody(keyAlice, map[string]any{"markdown": big}, nil))
			ps = a.wantError(t, http.StatusInsufficientStorage, CodeQuota)
			if !strings.Contains(ps[0].Message, "jobs.maxStoredBytesPerTenant") {
				t.Errorf("message = %q, want it to name the setting", ps[0].Message)
			}
		})
	}
}

// TestMultipartSpooled: asset parts are written to files under TempDir as
// they arrive, not kept in memory, and the files are gone once the request
// is answered.
func TestMultipartSpooled(t *testing.T) {
	t.Parallel()
	g := newGate()
	tmp := t.TempDir()
	e := newEnv(t, envOptions{wrap: g.wrap, tempDir: tmp})
	defer g.open()
	img := pngImage(t, 40, 30)
	unused := make([]byte, 3<<20)
	ch := async(func() answer {
		return e.postMultipart(context.Background(), "", []byte("# Spooled\n\n![a](img/a.png)\n"), "",
			asset{"img/a.png", img}, asset{"unused.bin", unused})
	})
	<-g.entered
	files, _ := filepath.Glob(filepath.Join(tmp, "outprint-upload-*", "asset-*"))
	var sizes []int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			sizes = append(sizes, fi.Size())
		}
	}
	slices.Sort(sizes)
	if want := []int64{int64(len(img)), int64(len(unused))}; !slices.Equal(sizes, want) {
		t.Errorf("spooled files = %v (sizes %v), want sizes %v", files, sizes, want)
	}
	g.open()
	(<-ch).wantPDF(t)
	if left, _ := filepath.Glob(filepath.Join(tmp, "outprint-upload-*")); len(left) != 0 {
		t.Errorf("upload folders left after the answer: %v", left)
	}
}

// TestClientDisconnectFreesSlot: a real client that disconnects while its
// render holds the slot frees it at once, whether the render is in the
// LaTeX conversion (thousands of distinct code languages: 15 ms each
// before issue 10, pure CPU that ignored the client) or already in TeX,
// whose processes are killed. The slot must be free long before the
// conversion alone would have ended (some 30 s here on today's writer).
func TestClientDisconnectFreesSlot(t *testing.T) {
	t.Parallel()
	texDir := t.TempDir()
	e := newEnv(t, envOptions{tempDir: texDir})
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "```lang%d\nx = %d\n```\n\n", i, i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := async(func() answer { return e.postJSON(ctx, "", b.String(), nil) })
	e.waitFor("the render to hold the slot", func(st admission.Stats) bool { return st.Running == 1 })
	cancel()
	if a := <-done; a.err == nil {
		t.Fatalf("the request was answered %d before the client left; the document renders too fast to test", a.status)
	}
	left := time.Now()
	testenv.EventuallyWithin(t, 10*time.Second, "the slot given back after the client left", func() bool {
		st := e.adm.Stats()
		return st.Running == 0 && st.Tickets == 0
	})
	t.Logf("slot free %s after the client left", time.Since(left).Round(time.Millisecond))
}
