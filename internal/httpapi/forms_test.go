package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// postForm sends parts (name → content) to a form route.
func (e *testEnv) postForm(ctx context.Context, route string, parts map[string][]byte) answer {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, name := range []string{"pdf", "values", "extra"} {
		b, ok := parts[name]
		if !ok {
			continue
		}
		w, _ := mw.CreateFormFile(name, name)
		_, _ = w.Write(b) // into a bytes.Buffer: cannot fail
	}
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, e.url+route, &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	return do(ctx, req)
}

func sharedFormFile(t *testing.T, name string) []byte {
	t.Helper()
	dir := testenv.SharedDir(t, "../..")
	if dir == "" {
		testenv.Missing(t, "../shared is absent")
	}
	b, err := os.ReadFile(filepath.Join(dir, "forms", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFormRoutes(t *testing.T) {
	testenv.Require(t, "qpdf", "prlimit", "pdftotext", "pdfinfo")
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	form := sharedFormFile(t, "acrobat-textfields.pdf")

	t.Run("fields", func(t *testing.T) {
		a := e.postForm(ctx, "/v1/forms/fields", map[string][]byte{"pdf": sharedFormFile(t, "openoffice.pdf")})
		if a.status != http.StatusOK {
			t.Fatalf("status = %d, want 200: %s", a.status, a.body)
		}
		var v struct {
			Fields []struct {
				Name   string   `json:"name"`
				Type   string   `json:"type"`
				Value  any      `json:"value"`
				Page   int      `json:"page"`
				MaxLen *int     `json:"maxLen"`
				Opts   []string `json:"options"`
			} `json:"fields"`
		}
		if err := json.Unmarshal(a.body, &v); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range v.Fields {
			if f.Name == "firstName" {
				found = f.Type == "text" && f.Value == "Lucía" && f.Page == 1 && f.MaxLen != nil && *f.MaxLen == 40
			}
		}
		if !found {
			t.Errorf("fields = %s, want firstName text Lucía page 1 maxLen 40", a.body)
		}
	})

	t.Run("fill", func(t *testing.T) {
		values := `{"Text3": "Zürich", "Text4": "東京", "Text6": "مرحبا"}`
		pdf := e.postForm(ctx, "/v1/forms/fill", map[string][]byte{"pdf": form, "values": []byte(values)}).wantPDF(t)
		text := pdfText(t, pdf)
		for _, want := range []string{"Zürich", "東京"} {
			if !strings.Contains(text, want) {
				t.Errorf("filled PDF text %q lacks %q", text, want)
			}
		}
		if got := pdfInfo(t, pdf, "Pages"); got != "1" {
			t.Errorf("pages = %q, want 1", got)
		}
		if got := pdfInfo(t, pdf, "Form"); got != "none" {
			t.Errorf("Form = %q, want none", got)
		}
	})

	t.Run("every problem at once", func(t *testing.T) {
		values := "{\n\"Text3\": \"fine\",\n\"Nope\": \"x\",\n\"Text5\": \"123456789012345\"\n}"
		ps := e.postForm(ctx, "/v1/forms/fill", map[string][]byte{"pdf": form, "values": []byte(values)}).wantError(t, 422, "unknown_field")
		if len(ps) != 2 || ps[0].Field != "Nope" || ps[0].Line != 3 || ps[1].Field != "Text5" || ps[1].Code != "invalid_value" || ps[1].Line != 4 {
			t.Errorf("problems = %+v, want unknown Nope (line 3) and invalid Text5 (line 4)", ps)
		}
	})

	t.Run("not a PDF", func(t *testing.T) {
		ps := e.postForm(ctx, "/v1/forms/fill", map[string][]byte{"pdf": sharedFormFile(t, "not-a-pdf.pdf"), "values": []byte(`{}`)}).wantError(t, 422, "invalid_pdf")
		if ps[0].Field != "pdf" {
			t.Errorf("field = %q, want pdf", ps[0].Field)
		}
	})

	t.Run("values part missing", func(t *testing.T) {
		e.postForm(ctx, "/v1/forms/fill", map[string][]byte{"pdf": form}).wantError(t, 400, "invalid")
	})
	e.wantIdle()
}
