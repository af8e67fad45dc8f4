package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

// Office documents (issue 28) through the command: `outprint convert`,
// and a gateway sending conversions and office jobs to a worker, each a
// real process with real LibreOffice.

// officeEnv gives conversions the time a loaded test machine needs to
// start LibreOffice; what the tests prove does not depend on it.
var officeEnv = []string{"OUTPRINT_TIMEOUT=5m"}

// officeOff turns Office conversion off (office.enabled) in the processes
// of tests about something else: each LibreOffice process costs about 10
// CPU-seconds to start, and a server waits for them before it is ready.
// launchRole and startServeCmd put it first, so that a test that passes
// officeOn in its own environment overrides it (the last value of a
// variable wins). The tests of Office, the metrics and the README's
// examples run the default.
const (
	officeOff = "OUTPRINT_OFFICE_ENABLED=false"
	officeOn  = "OUTPRINT_OFFICE_ENABLED=true"
)

// sharedOffice is the path of a document of ../shared/office.
func sharedOffice(t *testing.T, name string) string {
	t.Helper()
	dir := testenv.SharedDir(t, "../..")
	if dir == "" {
		testenv.Missing(t, "../shared is absent")
	}
	return filepath.Join(dir, "office", name)
}

// officeWords are the words expect.json says the document shows.
func officeWords(t *testing.T, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(sharedOffice(t, "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var expect map[string]struct {
		Words []string `json:"words"`
	}
	if err := json.Unmarshal(raw, &expect); err != nil {
		t.Fatal(err)
	}
	if len(expect[name].Words) == 0 {
		t.Fatalf("expect.json has no words for %s", name)
	}
	return expect[name].Words
}

// officeUpload is a multipart body with the file part.
func officeUpload(t *testing.T, path string) (body []byte, contentType string) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, filepath.Base(path)))
	w, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	// Writes to a bytes.Buffer do not fail.
	_, _ = w.Write(doc)
	_ = mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

// TestConvertCommand: `outprint convert` writes the PDF beside the file
// (or to -o) with the document's words; a file of another kind, an
// encrypted one and a missing one end in their exit codes, the first two
// with the error list under --json, and leave no PDF behind.
func TestConvertCommand(t *testing.T) {
	testenv.Require(t, "soffice", "python3", "pdftotext", "pdfinfo")
	dir := t.TempDir()
	name := "word-google-docs.docx"
	src, err := os.ReadFile(sharedOffice(t, name))
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, name)
	if err := os.WriteFile(in, src, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runWithEnv(t, officeEnv, "convert", in)
	if code != exitOK {
		t.Fatalf("outprint convert = %d, want 0\n%s%s", code, out, errOut)
	}
	pdf, err := os.ReadFile(filepath.Join(dir, "word-google-docs.pdf"))
	if err != nil {
		t.Fatalf("no PDF beside the document: %v", err)
	}
	text := pdfText(t, pdf)
	for _, w := range officeWords(t, name) {
		if !strings.Contains(text, w) {
			t.Errorf("converted PDF lacks %q", w)
		}
	}
	if n := pdfPages(t, pdf); !strings.Contains(errOut, fmt.Sprintf("%d pages from DOCX", n)) {
		t.Errorf("stderr = %q, want the page count pdfinfo reads (%d) and the format", errOut, n)
	}

	for _, tc := range []struct {
		name, file string
		code       int
		errCode    string
	}{
		{"plain text", sharedOffice(t, "SOURCES.md"), exitDocument, "format"},
		{"encrypted", sharedOffice(t, "hostile-encrypted-agile-pass.docx"), exitDocument, "encrypted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "out.pdf")
			out, errOut, code := runWithEnv(t, officeEnv, "convert", tc.file, "-o", target, "--json")
			var v struct {
				Errors []struct{ Code string } `json:"errors"`
			}
			if code != tc.code || json.Unmarshal([]byte(out), &v) != nil || len(v.Errors) == 0 || v.Errors[0].Code != tc.errCode {
				t.Errorf("outprint convert %s --json = %d %q %q, want %d with the error list, code %s", tc.name, code, out, errOut, tc.code, tc.errCode)
			}
			if _, err := os.Stat(target); err == nil {
				t.Errorf("a PDF was written after an error")
			}
		})
	}
	if _, _, code := runWithEnv(t, officeEnv, "convert", filepath.Join(dir, "missing.docx")); code != exitUsage {
		t.Errorf("outprint convert of a missing file = %d, want %d", code, exitUsage)
	}
}

// TestClusterOffice: a gateway, which has no LibreOffice of its own,
// sends a conversion to its worker as it sends renders (the file is the
// bundle) and answers the worker's PDF; a file that is no Office
// document is refused by the gateway itself; an office job is converted
// by the worker's job runtime; the worker's scrape counts the
// conversions by format.
func TestClusterOffice(t *testing.T) {
	testenv.Require(t, "xelatex", "soffice", "python3", "pdfinfo", "pdftotext")
	env := clusterDB(t, "OUTPRINT_STORE=file://"+t.TempDir(), officeEnv[0], officeOn)
	w := startRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	g := startRole(t, roleGateway, append(env, "OUTPRINT_GATEWAY_WORKERS="+w.url)...)
	name := "word-google-docs.docx"
	words := officeWords(t, name)

	body, ct := officeUpload(t, sharedOffice(t, name))
	a := post(g.url+"/v1/convert", map[string]string{"Content-Type": ct}, body)
	if a.err != nil || a.status != http.StatusOK || a.header.Get("Content-Type") != "application/pdf" {
		t.Fatalf("POST /v1/convert on the gateway: %d %s (%v), want 200 application/pdf", a.status, tailString(string(a.body), 400), a.err)
	}
	text := pdfText(t, a.body)
	for _, word := range words {
		if !strings.Contains(text, word) {
			t.Errorf("converted PDF lacks %q", word)
		}
	}
	if cd, want := a.header.Get("Content-Disposition"), `filename="word-google-docs.pdf"`; !strings.Contains(cd, want) {
		t.Errorf("Content-Disposition = %q, want %s", cd, want)
	}
	if got, want := a.header.Get("X-Outprint-Pages"), fmt.Sprint(pdfPages(t, a.body)); got != want {
		t.Errorf("X-Outprint-Pages = %q, want pdfinfo's %s", got, want)
	}
	if n := w.metric(`outprint_office_conversions_total{format="docx",result="ok"}`); n != 1 {
		t.Errorf("the worker's docx conversions = %v, want 1: the gateway converts nothing itself", n)
	}

	body, ct = officeUpload(t, sharedOffice(t, "SOURCES.md"))
	if a := post(g.url+"/v1/convert", map[string]string{"Content-Type": ct}, body); a.status != http.StatusUnsupportedMediaType || !bytes.Contains(a.body, []byte(`"format"`)) {
		t.Errorf("POST /v1/convert of Markdown on the gateway: %d %s, want 415 format", a.status, a.body)
	}

	body, ct = officeUpload(t, sharedOffice(t, name))
	a = post(g.url+"/v1/jobs", map[string]string{"Content-Type": ct}, body)
	if a.err != nil || a.status != http.StatusAccepted {
		t.Fatalf("office job on the gateway: %d %s (%v), want 202", a.status, a.body, a.err)
	}
	var job struct {
		ID       string `json:"id"`
		Title    string `json:"title"`
		State    string `json:"state"`
		Progress struct {
			Pages int `json:"pages"`
		} `json:"progress"`
	}
	if err := json.Unmarshal(a.body, &job); err != nil {
		t.Fatalf("POST /v1/jobs answered %q: %v", a.body, err)
	}
	testenv.EventuallyWithin(t, 2*time.Minute, "the office job to end", func() bool {
		a := get(g.url + "/v1/jobs/" + job.ID)
		if json.Unmarshal(a.body, &job) != nil {
			return false
		}
		return job.State == "succeeded" || job.State == "failed" || job.State == "cancelled"
	})
	if job.State != "succeeded" {
		t.Fatalf("office job state = %s, want succeeded", job.State)
	}
	a = get(g.url + "/v1/jobs/" + job.ID + "/result")
	if a.status != http.StatusOK || pdfPages(t, a.body) != job.Progress.Pages {
		t.Errorf("office job result: %d, pages %d, want 200 with the job's pages", a.status, job.Progress.Pages)
	}
	if text := pdfText(t, a.body); !strings.Contains(text, words[0]) {
		t.Errorf("office job PDF lacks %q", words[0])
	}
	if job.Title != "word-google-docs" {
		t.Errorf("office job title = %q, want the upload's name", job.Title)
	}
}
