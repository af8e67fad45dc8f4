package main

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

// formBody is a multipart body of the form routes: the pdf part and, when
// values is not nil, the values part.
func formBody(t *testing.T, pdf []byte, pdfName string, values []byte) (body []byte, contentType string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	pw, err := mw.CreateFormFile("pdf", pdfName)
	if err != nil {
		t.Fatal(err)
	}
	// Into a bytes.Buffer: these writes cannot fail.
	_, _ = pw.Write(pdf)
	if values != nil {
		vw, err := mw.CreateFormFile("values", "values.json")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = vw.Write(values)
	}
	_ = mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

// pdfText is the text of a PDF as pdftotext reads it.
func pdfText(t *testing.T, pdf []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "text.pdf")
	if err := os.WriteFile(path, pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdftotext", path, "-").CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext: %v\n%s", err, out)
	}
	return string(out)
}

// TestClusterForms: a gateway serves the public routes `serve` does
// beyond renders — the page for people, forms read and filled (by a
// worker, under the gateway's capacity as renders are), form jobs, and
// page previews of a job's result — with the same answers; and its
// scrape has the gateway metrics the dashboard and alerts name.
func TestClusterForms(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex", "pdfinfo", "pdftotext", "qpdf")
	env := clusterDB(t, "OUTPRINT_STORE=file://"+t.TempDir())
	w := launchRole(t, roleWorker, append(env, "OUTPRINT_WORKER_CAPACITY=1")...)
	g := launchRole(t, roleGateway, append(env, "OUTPRINT_GATEWAY_WORKERS="+w.url)...)
	w.waitReady()
	g.waitReady() // it is ready once it saw its one worker ready
	form, err := os.ReadFile("../../examples/onboarding-form.pdf")
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile("../../examples/onboarding-values.json")
	if err != nil {
		t.Fatal(err)
	}

	// The gateway's own metrics, which the dashboard and the alerts
	// read, are in its scrape: the worker ready.
	fams := parseScrape(t, get(g.url+"/metrics").body)
	if !hasSeries(fams, "outprint_gateway_worker_ready", "worker", w.url) {
		t.Errorf("gateway scrape: no outprint_gateway_worker_ready{worker=%q}", w.url)
	}
	exprs, _ := expressions(t)
	used := 0
	for where, expr := range exprs {
		names, _ := metricNames(expr)
		for _, n := range names {
			if strings.HasPrefix(n, gatewayMetricPrefix) {
				used++
				if fams[n] == nil {
					t.Errorf("%s names %s, which the gateway's scrape does not have", where, n)
				}
			}
		}
	}
	if used < 3 {
		t.Errorf("the dashboard and the rules name gateway metrics %d times, want a panel or two and an alert", used)
	}

	// The page for people, with its form section: the gateway offers
	// what the page offers.
	if a := get(g.url + "/"); a.status != http.StatusOK || !bytes.Contains(a.body, []byte("Fill a PDF form")) {
		t.Errorf("GET / on the gateway: %d, want 200 with the forms section", a.status)
	}

	// The fields, read by the worker.
	body, ct := formBody(t, form, "onboarding-form.pdf", nil)
	a := post(g.url+"/v1/forms/fields", map[string]string{"Content-Type": ct}, body)
	if a.err != nil || a.status != http.StatusOK {
		t.Fatalf("POST /v1/forms/fields: %d %s (%v), want 200", a.status, a.body, a.err)
	}
	var fields struct {
		Fields []struct {
			Name   string `json:"name"`
			Type   string `json:"type"`
			MaxLen *int   `json:"maxLen"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(a.body, &fields); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, f := range fields.Fields {
		names[f.Name] = f.Type
	}
	var want map[string]any
	if err := json.Unmarshal(values, &want); err != nil {
		t.Fatalf("values: %v", err)
	}
	for name := range want {
		if _, ok := names[name]; !ok {
			t.Errorf("fields through the gateway = %v, want one named %q", names, name)
		}
	}

	// The fill, by the worker: the values are in the flattened PDF.
	body, ct = formBody(t, form, "onboarding-form.pdf", values)
	a = post(g.url+"/v1/forms/fill", map[string]string{"Content-Type": ct}, body)
	if a.err != nil || a.status != http.StatusOK || a.header.Get("Content-Type") != "application/pdf" {
		t.Fatalf("POST /v1/forms/fill: %d %s (%v), want 200 application/pdf", a.status, tailString(string(a.body), 400), a.err)
	}
	if cd, want := a.header.Get("Content-Disposition"), `filename="onboarding-form-filled.pdf"`; !strings.Contains(cd, want) {
		t.Errorf("fill Content-Disposition = %q, want %s", cd, want)
	}
	if text := pdfText(t, a.body); !strings.Contains(text, "A1234567") || !strings.Contains(text, "Engineering") {
		t.Errorf("filled PDF text = %q, want the values A1234567 and Engineering", text)
	}
	if n := w.metric(`outprint_render_duration_seconds_count{result="ok"}`); n < 2 {
		t.Errorf("the worker's renders after fields and fill = %v, want both (2): the gateway runs no forms itself", n)
	}

	// A bad value is the worker's error list, answered by the gateway.
	body, ct = formBody(t, form, "onboarding-form.pdf", []byte(`{"no such field": "x"}`))
	a = post(g.url+"/v1/forms/fill", map[string]string{"Content-Type": ct}, body)
	if a.status != http.StatusUnprocessableEntity || !bytes.Contains(a.body, []byte(`"errors"`)) {
		t.Errorf("fill with an unknown field: %d %s, want 422 with the error list", a.status, a.body)
	}

	// A form job: checked by a worker at acceptance, filled by a worker.
	a = post(g.url+"/v1/jobs", map[string]string{"Content-Type": ct}, body)
	if a.status != http.StatusUnprocessableEntity {
		t.Errorf("form job with an unknown field: %d %s, want 422 before a job exists", a.status, a.body)
	}
	body, ct = formBody(t, form, "onboarding-form.pdf", values)
	a = post(g.url+"/v1/jobs", map[string]string{"Content-Type": ct}, body)
	if a.err != nil || a.status != http.StatusAccepted {
		t.Fatalf("form job: %d %s (%v), want 202", a.status, a.body, a.err)
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
		t.Fatalf("form job: %s (%v), want the job", a.body, err)
	}
	testenv.EventuallyWithin(t, 2*time.Minute, "the form job to end", func() bool {
		a := get(g.url + "/v1/jobs/" + job.ID)
		// An answer that does not parse leaves the state as it was: ask again.
		_ = json.Unmarshal(a.body, &job)
		return job.State == "succeeded" || job.State == "failed" || job.State == "cancelled"
	})
	if job.State != "succeeded" {
		t.Fatalf("form job state = %s, want succeeded", job.State)
	}
	a = get(g.url + "/v1/jobs/" + job.ID + "/result")
	if a.status != http.StatusOK || pdfPages(t, a.body) != job.Progress.Pages {
		t.Errorf("form job result: %d, pages %d, want 200 with %d pages", a.status, job.Progress.Pages, job.Progress.Pages)
	}
	if cd, want := a.header.Get("Content-Disposition"), `filename="onboarding-form-filled.pdf"`; !strings.Contains(cd, want) {
		t.Errorf("form job result Content-Disposition = %q, want %s", cd, want)
	}
	if text := pdfText(t, a.body); !strings.Contains(text, "A1234567") {
		t.Errorf("form job PDF text = %q, want the value A1234567", text)
	}

	// The job shows its document: the filled form's name, in the job and
	// in the list.
	if job.Title != "onboarding-form-filled" {
		t.Errorf("form job title = %q, want onboarding-form-filled", job.Title)
	}
	var list struct {
		Jobs []struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"jobs"`
	}
	if a := get(g.url + "/v1/jobs"); json.Unmarshal(a.body, &list) != nil || len(list.Jobs) != 1 || list.Jobs[0].Title != job.Title {
		t.Errorf("GET /v1/jobs = %d %s, want the form job with its title", a.status, a.body)
	}

	// The page preview of the result, drawn by the gateway.
	a = get(g.url + "/v1/jobs/" + job.ID + "/pages/1.png?width=200")
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "image/png" || !bytes.HasPrefix(a.body, []byte("\x89PNG")) {
		t.Errorf("page preview on the gateway: %d %q, want 200 image/png", a.status, a.header.Get("Content-Type"))
	}
}
