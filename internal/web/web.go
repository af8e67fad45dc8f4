// Package web is outprint's page for people: print a Markdown document
// with its images as a job, watch it, preview its pages and download it,
// and list one's recent jobs — everything the HTTP API offers, without
// curl. The files are plain HTML, CSS and JavaScript embedded in the
// binary, so the page needs no build step and no Node at run time; it only
// calls the public API (/v1/jobs and below) with the caller's credentials.
//
// It also serves the progress page an Outline reader's browser gets when a
// document takes longer than about a second to print (see
// httpapi.outlineRender): the page watches the job and downloads the PDF
// when it is ready.
//
// Every answer carries a strict Content-Security-Policy: scripts and
// styles only from this origin, no inline script, no framing. Data a page
// needs (a job id) travels in data- attributes, never in script.
package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/outprint/outprint/internal/httperr"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every answer of the page.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// AssetsPrefix is where the page's files are served.
const AssetsPrefix = "/assets/"

// Site serves the page and its files. It is safe for concurrent use.
type Site struct {
	files    fs.FS
	index    []byte
	progress *template.Template
}

// New returns the site on the embedded files.
func New() (*Site, error) {
	files, err := fs.Sub(static, "static")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	index, err := fs.ReadFile(files, "index.html")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	progress, err := template.ParseFS(files, "progress.html")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	return &Site{files: files, index: index, progress: progress}, nil
}

// headers sets what every answer of the page carries.
func headers(w http.ResponseWriter, contentType string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// The files are small and change with the binary; revalidating costs
	// little and never shows a stale page after an upgrade.
	h.Set("Cache-Control", "no-cache")
}

// errNoFile answers a path that names none of the page's files.
var errNoFile = httperr.NotFound("", "no such file of the page")

// ServeHTTP answers GET / with the page and GET /assets/{file} with its
// files; anything else is 404 with the error list, as every outprint
// answer (httperr).
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" {
		headers(w, "text/html; charset=utf-8")
		// A failed write means the client went away; the status is sent
		// and there is no one left to tell.
		_, _ = w.Write(s.index)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, AssetsPrefix)
	if !ok || name == "" || strings.Contains(name, "/") || strings.HasSuffix(name, ".html") {
		httperr.Write(w, errNoFile.Answer)
		return
	}
	data, err := fs.ReadFile(s.files, name)
	if err != nil {
		httperr.Write(w, errNoFile.Answer)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	headers(w, ct)
	_, _ = w.Write(data) // the client went away: no one left to tell
}

// Progress answers with the page that watches job id for an Outline
// reader and downloads its result when it succeeds. title is the
// document's title as Outline shows it.
func (s *Site) Progress(w http.ResponseWriter, r *http.Request, id, title string) {
	var buf bytes.Buffer
	if err := s.progress.Execute(&buf, map[string]string{"ID": id, "Title": title}); err != nil {
		httperr.Write(w, httperr.Of(fmt.Errorf("progress page: %w", err)))
		return
	}
	headers(w, "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes()) // the client went away: no one left to tell
}

// ProgressStart answers at once with the progress page of a job that is
// not accepted yet (an Outline document whose images are still being
// fetched) and flushes it, leaving the page open. The caller ends the page
// with end: with the accepted job's id, or with the reason the job was not
// accepted (id empty). The page's script runs once the page is complete
// and then follows the job.
func (s *Site) ProgressStart(w http.ResponseWriter, r *http.Request, title string) (end func(id, message string) error, err error) {
	var buf bytes.Buffer
	if err := s.progress.Execute(&buf, map[string]string{"ID": "", "Title": title}); err != nil {
		return nil, fmt.Errorf("progress page: %w", err)
	}
	headers(w, "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The first Write sends the headers with 200: statuses are the HTTP
	// edge's to choose, and this page is only ever a success.
	if _, err := w.Write(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("progress page: %w", err)
	}
	// A writer that cannot flush sends the page with its end, as if the
	// job had been accepted at once.
	_ = http.NewResponseController(w).Flush()
	return func(id, message string) error {
		var buf bytes.Buffer
		if err := s.progress.ExecuteTemplate(&buf, "late", map[string]string{"ID": id, "Error": message}); err != nil {
			return fmt.Errorf("progress page: %w", err)
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("progress page: %w", err)
		}
		return nil
	}, nil
}
