package httpapi

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/testenv"
)

// formJobBody is a POST /v1/jobs with the parts pdf and values, in that
// order or values first.
func formJobBody(key string, pdf []byte, values string, header map[string]string, valuesFirst bool) request {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	add := func(name string, b []byte) {
		w, _ := mw.CreateFormFile(name, name)
		_, _ = w.Write(b) // into a bytes.Buffer: cannot fail
	}
	if valuesFirst {
		add("values", []byte(values))
		add("pdf", pdf)
	} else {
		add("pdf", pdf)
		add("values", []byte(values))
	}
	_ = mw.Close()
	return request{method: http.MethodPost, path: "/v1/jobs", key: key, ctype: mw.FormDataContentType(), body: buf.Bytes(), header: header}
}

func TestFormJob(t *testing.T) {
	testenv.Require(t, "qpdf", "prlimit")
	// A minute to read the form at acceptance, not the default 5 s: under
	// make test's -race run qpdf once took longer, and the budget has
	// tests of its own (TestCheckOutlivesBudget); this one is about form
	// jobs.
	e := newJobsEnv(t, jobsOptions{kind: "sqlite", checkBudget: time.Minute})
	form := sharedFormFile(t, "acrobat-textfields.pdf")
	values := `{"Text3": "Zürich", "Text4": "東京", "Text5": "12345678901"}`
	idem := map[string]string{"Idempotency-Key": "onboarding-1"}

	v := e.do(formJobBody(keyAlice, form, values, idem, false)).view(t, http.StatusAccepted)
	v = e.waitState(keyAlice, v.ID, jobs.StateSucceeded)
	if v.State != jobs.StateSucceeded || v.Attempts != 1 {
		t.Fatalf("job = %+v, want succeeded on the first attempt", v)
	}
	a := e.do(request{method: http.MethodGet, path: "/v1/jobs/" + v.ID + "/result", key: keyAlice})
	pdf := a.wantPDF(t)
	text := pdfText(t, pdf)
	for _, want := range []string{"Zürich", "東京"} {
		if !strings.Contains(text, want) {
			t.Errorf("result text %q lacks %q", text, want)
		}
	}
	if got := pdfInfo(t, pdf, "Form"); got != "none" {
		t.Errorf("result Form = %q, want none", got)
	}

	// The same request (parts in another order) with the same key is the
	// same job; other values with that key are a conflict.
	again := e.do(formJobBody(keyAlice, form, values, idem, true)).view(t, http.StatusOK)
	if again.ID != v.ID {
		t.Errorf("repeated request made job %s, want %s", again.ID, v.ID)
	}
	e.do(formJobBody(keyAlice, form, `{"Text3": "Bern"}`, idem, false)).wantError(t, http.StatusConflict, "idempotency_mismatch")

	// Bad values are answered at acceptance, every one, before a job exists.
	ps := e.do(formJobBody(keyAlice, form, "{\n\"Nope\": 1,\n\"Text5\": \"123456789012345\"\n}", nil, false)).wantError(t, 422, "unknown_field")
	if len(ps) != 2 || ps[0].Line != 2 || ps[1].Field != "Text5" || ps[1].Code != "invalid_value" {
		t.Errorf("problems = %+v, want unknown Nope (line 2) and invalid Text5", ps)
	}
	e.do(formJobBody(keyAlice, sharedFormFile(t, "not-a-pdf.pdf"), `{}`, nil, false)).wantError(t, 422, "invalid_pdf")
}
