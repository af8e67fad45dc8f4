package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/httperr"
	"github.com/outprint/outprint/internal/limits"
)

// TestServe: the page and its files are served with the page's CSP; a
// path that names no file is a 404 with the error list every outprint
// answer carries, not Go's plain text.
func TestServe(t *testing.T) {
	t.Parallel()
	site, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path   string
		status int
		ctype  string
	}{
		{"/", http.StatusOK, "text/html; charset=utf-8"},
		{"/assets/app.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{"/assets/nothing.js", http.StatusNotFound, "application/json"},
		{"/assets/index.html", http.StatusNotFound, "application/json"},
		{"/assets/", http.StatusNotFound, "application/json"},
		{"/elsewhere", http.StatusNotFound, "application/json"},
	} {
		rec := httptest.NewRecorder()
		site.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.status || rec.Header().Get("Content-Type") != tc.ctype {
			t.Errorf("GET %s = %d %q, want %d %q", tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.status, tc.ctype)
		}
		if tc.status == http.StatusOK {
			if csp := rec.Header().Get("Content-Security-Policy"); csp != CSP {
				t.Errorf("GET %s: CSP = %q, want %q", tc.path, csp, CSP)
			}
			continue
		}
		var body struct{ Errors []limits.Problem }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body.Errors) != 1 || body.Errors[0].Code != httperr.CodeNotFound {
			t.Errorf("GET %s: body %s, want an error list of one not_found (%v)", tc.path, rec.Body, err)
		}
	}
}

// TestProgress: the progress page names the job in a data- attribute and
// escapes the title, which is the document's (user) text.
func TestProgress(t *testing.T) {
	t.Parallel()
	site, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	site.Progress(rec, httptest.NewRequest(http.MethodGet, "/render/x", nil), "0190-job", `<script>alert(1)</script>`)
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, "0190-job") || strings.Contains(body, "<script>alert") {
		t.Errorf("Progress = %d %s, want 200 with the job id and the title escaped", rec.Code, body)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Progress Cache-Control = %q, want no-store", cc)
	}
}
