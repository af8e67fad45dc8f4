package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/worker"
)

// Office documents (issue 28) through the real server: POST /v1/convert
// and office jobs, on a real LibreOffice pool, with real documents of
// ../shared/office checked by pdftotext and pdfinfo.

// officeLimits gives conversions the time a loaded test machine needs to
// start LibreOffice; what the tests prove does not depend on it.
var officeLimits = limits.Render{Timeout: 5 * time.Minute}

// officePool is a LibreOffice pool of slots processes, closed when the
// test ends.
func officePool(t *testing.T, slots int) *office.Pool {
	t.Helper()
	testenv.Require(t, "soffice", "python3", "pdftotext", "pdfinfo")
	p, err := office.NewPool(context.Background(), office.Config{Slots: slots, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("office.NewPool: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("office pool Close: %v", err)
		}
	})
	return p
}

// sharedOffice reads a document of ../shared/office.
func sharedOffice(t *testing.T, name string) []byte {
	t.Helper()
	dir := testenv.SharedDir(t, "../..")
	if dir == "" {
		testenv.Missing(t, "../shared is absent")
	}
	b, err := os.ReadFile(filepath.Join(dir, "office", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// officeWords are the words expect.json says the document shows.
func officeWords(t *testing.T, name string) []string {
	t.Helper()
	var expect map[string]struct {
		Words []string `json:"words"`
	}
	if err := json.Unmarshal(sharedOffice(t, "expect.json"), &expect); err != nil {
		t.Fatal(err)
	}
	w := expect[name].Words
	if len(w) == 0 {
		t.Fatalf("expect.json has no words for %s", name)
	}
	return w
}

// officeBody is a multipart body with a file part (and a metadata part
// and a callbackUrl part when not empty).
func officeBody(fileName string, doc []byte, metadata string) (ctype string, body []byte) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, fileName))
	// Writes to a bytes.Buffer do not fail.
	w, _ := mw.CreatePart(h)
	_, _ = w.Write(doc)
	if metadata != "" {
		w, _ := mw.CreateFormFile("metadata", "metadata.json")
		_, _ = w.Write([]byte(metadata))
	}
	_ = mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

// postOffice sends a document to /v1/convert as key ("": anonymous).
func (e *testEnv) postOffice(ctx context.Context, key, fileName string, doc []byte, metadata string) answer {
	ctype, body := officeBody(fileName, doc, metadata)
	req, err := http.NewRequest(http.MethodPost, e.url+"/v1/convert", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return do(ctx, req)
}

// wantWords checks that the PDF's text (pdftotext) shows every word.
func wantWords(t *testing.T, pdf []byte, words []string) {
	t.Helper()
	text := pdfText(t, pdf)
	for _, w := range words {
		if !strings.Contains(text, w) {
			t.Errorf("PDF text lacks %q:\n%.2000s", w, text)
		}
	}
}

// TestConvertRoute: real documents convert through POST /v1/convert; the
// answer is a PDF like /v1/render's (no-store, named after the upload,
// X-Outprint-Pages as pdfinfo counts them) and shows the document's words.
func TestConvertRoute(t *testing.T) {
	e := newEnv(t, envOptions{office: officePool(t, 1), limits: officeLimits})
	ctx := context.Background()
	for _, tc := range []struct{ file, wantName string }{
		{"word-google-docs.docx", `filename="word-google-docs.pdf"`},
		// A CSV is told from other text by its name alone.
		{"csv-openoffice-multiline.csv", `filename="csv-openoffice-multiline.pdf"`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			a := e.postOffice(ctx, "", tc.file, sharedOffice(t, tc.file), "")
			pdf := a.wantPDF(t)
			wantWords(t, pdf, officeWords(t, tc.file))
			if cd := a.header.Get("Content-Disposition"); !strings.Contains(cd, tc.wantName) {
				t.Errorf("Content-Disposition = %q, want %s", cd, tc.wantName)
			}
			if got, want := a.header.Get("X-Outprint-Pages"), pdfInfo(t, pdf, "Pages"); got != want || got == "" || got == "0" {
				t.Errorf("X-Outprint-Pages = %q, want pdfinfo's %q", got, want)
			}
		})
	}
	e.wantIdle()
	if !strings.Contains(e.logs.String(), `"msg":"converted"`) || !strings.Contains(e.logs.String(), `"format":"docx"`) {
		t.Errorf("no converted log line with the format:\n%s", e.logs.String())
	}
}

// TestConvertRefusals: what is not an Office document, an encrypted or
// damaged one, a malformed request and a server without LibreOffice are
// each answered with their documented status and code, and every count
// is given back. No LibreOffice runs here: each is refused before.
func TestConvertRefusals(t *testing.T) {
	ctx := context.Background()
	docx := sharedOffice(t, "word-google-docs.docx")
	pdf := sharedFormFile(t, "acrobat-textfields.pdf")

	// A server without LibreOffice.
	e := newEnv(t, envOptions{})
	for _, tc := range []struct {
		name     string
		file     string
		doc      []byte
		metadata string
		status   int
		code     string
		message  string
	}{
		{"plain text", "notes.txt", []byte("just some words\n"), "", 415, "format", "plain text"},
		{"a PDF", "form.pdf", pdf, "", 415, "format", "PDF"},
		{"named .docx but text", "report.docx", []byte("not a zip at all"), "", 415, "format", ""},
		{"encrypted DOCX", "secret.docx", sharedOffice(t, "hostile-encrypted-agile-pass.docx"), "", 422, "encrypted", "password-protected documents cannot be converted"},
		{"encrypted ODT", "secret.odt", sharedOffice(t, "hostile-encrypted.odt"), "", 422, "encrypted", "password-protected"},
		{"truncated DOCX", "cut.docx", sharedOffice(t, "hostile-truncated.docx"), "", 422, "corrupt", "DOCX"},
		{"bad paper", "report.docx", docx, `{"paper":"a3"}`, 422, "invalid", "paper must be a4 or letter"},
		{"unknown metadata", "report.docx", docx, `{"title":"x"}`, 422, "invalid", ""},
		{"not installed", "report.docx", docx, "", 422, "invalid", "Office conversion is not available on this server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := e.postOffice(ctx, "", tc.file, tc.doc, tc.metadata).wantError(t, tc.status, tc.code)
			if !strings.Contains(ps[0].Message, tc.message) {
				t.Errorf("message = %q, want it to say %q", ps[0].Message, tc.message)
			}
		})
	}
	t.Run("not multipart", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/convert", strings.NewReader(string(docx)))
		req.Header.Set("Content-Type", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
		do(ctx, req).wantError(t, 415, "unsupported")
	})
	t.Run("no file part", func(t *testing.T) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		w, _ := mw.CreateFormFile("document", "report.docx")
		_, _ = w.Write(docx) // to a bytes.Buffer: no error
		_ = mw.Close()
		req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/convert", &buf)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		do(ctx, req).wantError(t, 400, "invalid")
	})
	e.wantIdle()
}

// officeGate holds conversions before the converter until released: the
// slot is taken, LibreOffice has not started.
type officeGate struct {
	next    worker.Converter
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newOfficeGate(next worker.Converter) *officeGate {
	return &officeGate{next: next, entered: make(chan struct{}, 8), release: make(chan struct{})}
}

func (g *officeGate) Convert(ctx context.Context, doc []byte, f office.Format, o office.Options) ([]byte, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.next.Convert(ctx, doc, f, o)
}

func (g *officeGate) open() { g.once.Do(func() { close(g.release) }) }

// TestConvertFullServer: a conversion takes a slot of the render
// capacity; with every slot busy and no queue another user's conversion
// is refused 429 busy with Retry-After, as a render would be; a render
// is refused too, and the held conversion still ends in its PDF.
func TestConvertFullServer(t *testing.T) {
	gate := newOfficeGate(officePool(t, 1))
	defer gate.open()
	e := newEnv(t, envOptions{
		limits:    officeLimits,
		office:    gate,
		keys:      map[string]string{"key-a": "alice/acme", "key-b": "bob/acme"},
		admission: admission.Config{Slots: 1, QueueDepth: 0, PerUser: 1},
	})
	ctx := context.Background()
	docx := sharedOffice(t, "word-google-docs.docx")
	first := async(func() answer { return e.postOffice(ctx, "key-a", "a.docx", docx, "") })
	<-gate.entered
	e.waitFor("the first conversion to hold the slot", func(st admission.Stats) bool { return st.Running == 1 })

	a := e.postOffice(ctx, "key-b", "b.docx", docx, "")
	a.wantError(t, http.StatusTooManyRequests, "busy")
	a.retryAfter(t)
	e.postJSON(ctx, "key-b", "# A render\n", nil).wantError(t, http.StatusTooManyRequests, "busy")

	gate.open()
	wantWords(t, (<-first).wantPDF(t), officeWords(t, "word-google-docs.docx")[:2])
	e.wantIdle()
}

// TestOfficeJob: POST /v1/jobs with a file part is an office job: 202,
// the job runs to succeeded on the job workers (which take the same
// slots), its result is the PDF named after the upload with the
// document's words, and Idempotency-Key covers the file: the same file
// again is the same job, another file under the key a 409.
func TestOfficeJob(t *testing.T) {
	pool := officePool(t, 1)
	for _, kind := range dbKinds {
		t.Run(kind, func(t *testing.T) {
			e := newJobsEnv(t, jobsOptions{kind: kind, office: pool, timeout: officeLimits.Timeout})
			name := "word-google-docs.docx"
			doc := sharedOffice(t, name)
			submit := func(fileName string, doc []byte) answer {
				ctype, body := officeBody(fileName, doc, `{"paper":"letter"}`)
				return e.do(request{method: http.MethodPost, path: "/v1/jobs", key: keyAlice, ctype: ctype, body: body,
					header: map[string]string{"Idempotency-Key": "office-1"}})
			}
			v := submit("Quarterly report.docx", doc).view(t, http.StatusAccepted)
			if v.Title != "Quarterly report" {
				t.Errorf("title = %q, want the upload's name without its extension", v.Title)
			}
			again := submit("Quarterly report.docx", doc).view(t, http.StatusOK)
			if again.ID != v.ID {
				t.Errorf("the same request under the same key = job %s, want %s", again.ID, v.ID)
			}
			submit("Quarterly report.docx", sharedOffice(t, "word-apple-pages-lists.docx")).wantError(t, http.StatusConflict, CodeIdempotencyMismatch)

			// The bound only stops a broken test from hanging: a loaded
			// machine starts LibreOffice slowly.
			var done jobs.View
			testenv.EventuallyWithin(t, officeLimits.Timeout, "the office job to end", func() bool {
				done = e.get(keyAlice, v.ID)
				return isTerminal(done.State)
			})
			if done.State != jobs.StateSucceeded {
				t.Fatalf("job state = %s (error %+v), want succeeded", done.State, done.Error)
			}
			a := e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/result", key: keyAlice})
			pdf := a.wantPDF(t)
			wantWords(t, pdf, officeWords(t, name))
			if cd := a.header.Get("Content-Disposition"); !strings.Contains(cd, `filename="Quarterly report.pdf"`) {
				t.Errorf("Content-Disposition = %q, want Quarterly report.pdf", cd)
			}
			if got := pdfInfo(t, pdf, "Pages"); fmt.Sprint(done.Progress.Pages) != got {
				t.Errorf("job pages = %d, pdfinfo says %s", done.Progress.Pages, got)
			}

			// A file outprint cannot convert is refused at acceptance, not
			// accepted as a job that fails.
			ctype, body := officeBody("notes.txt", []byte("plain words\n"), "")
			e.do(request{method: http.MethodPost, path: "/v1/jobs", key: keyAlice, ctype: ctype, body: body}).wantError(t, 415, "format")
		})
	}
}
