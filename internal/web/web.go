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

// ServeHTTP answers GET / with the page and GET /assets/{file} with its
// files; anything else is 404.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" {
		headers(w, "text/html; charset=utf-8")
		w.Write(s.index)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, AssetsPrefix)
	if !ok || name == "" || strings.Contains(name, "/") || strings.HasSuffix(name, ".html") {
		http.NotFound(w, r)
		return
	}
	data, err := fs.ReadFile(s.files, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	headers(w, ct)
	w.Write(data)
}

// Progress answers with the page that watches job id for an Outline
// reader and downloads its result when it succeeds. title is the
// document's title as Outline shows it.
func (s *Site) Progress(w http.ResponseWriter, r *http.Request, id, title string) {
	var buf bytes.Buffer
	if err := s.progress.Execute(&buf, map[string]string{"ID": id, "Title": title}); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	headers(w, "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}
