package imagetest

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// officeDir returns the path of the shared Office documents; they are
// required here.
func officeDir(t *testing.T) string {
	t.Helper()
	shared := testenv.SharedDir(t, moduleRoot)
	if shared == "" {
		testenv.Missing(t, "../shared/office (the office step converts its documents)")
	}
	return filepath.Join(shared, "office")
}

// convertOffice converts real Office documents through the image's
// LibreOffice (POST /v1/convert): a DOCX from Google Docs and an XLSX from
// Google Sheets print the words expect.json lists, with their fonts
// embedded; a password-protected DOCX is refused with 422 encrypted.
func convertOffice(t *testing.T, c *client) {
	t.Helper()
	dir := officeDir(t)
	raw, err := os.ReadFile(filepath.Join(dir, "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var expect map[string]struct{ Words []string }
	if err := json.Unmarshal(raw, &expect); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"word-google-docs.docx", "excel-google-sheets.xlsx"} {
		ct, body := multipartBody(t, part{"file", name, filepath.Join(dir, name)})
		status, got, pdf := c.do(t, http.MethodPost, "/v1/convert", ct, body)
		if status != http.StatusOK || got != "application/pdf" {
			t.Errorf("POST /v1/convert %s = %d %s: %.2000s", name, status, got, pdf)
			continue
		}
		path := writeTemp(t, strings.TrimSuffix(name, filepath.Ext(name))+".pdf", pdf)
		if n := pdfPages(t, path); n < 1 {
			t.Errorf("%s converted to %d pages, want at least 1", name, n)
		}
		text := tool(t, "pdftotext", path, "-")
		words := expect[name].Words
		if len(words) == 0 {
			t.Fatalf("expect.json lists no words for %s", name)
		}
		for _, w := range words {
			if !strings.Contains(text, w) {
				t.Errorf("pdftotext of %s lacks %q", name, w)
			}
		}
		fontsEmbedded(t, path)
	}

	name := "hostile-encrypted-agile-pass.docx"
	ct, body := multipartBody(t, part{"file", name, filepath.Join(dir, name)})
	status, _, answer := c.do(t, http.MethodPost, "/v1/convert", ct, body)
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(answer), `"encrypted"`) {
		t.Errorf("POST /v1/convert %s = %d %.500s, want 422 encrypted", name, status, answer)
	}
}
