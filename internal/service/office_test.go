package service

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/testenv"
)

// TestOfficeStatus: `outprint config check` says LibreOffice converts
// Office documents where soffice and python3-uno are installed, that
// conversion is off where office.enabled is false, and that they are not
// installed, naming the package, where soffice is missing.
func TestOfficeStatus(t *testing.T) {
	testenv.Require(t, "soffice", "python3")
	on, off := loadConfig(t, ""), loadConfig(t, "office:\n  enabled: false\n")
	if got := OfficeStatus(context.Background(), on); !strings.HasPrefix(got, "converted by LibreOffice (/") {
		t.Errorf("OfficeStatus(default) = %q, want converted by LibreOffice (its path)", got)
	}
	if got := OfficeStatus(context.Background(), off); !strings.HasPrefix(got, "off (office.enabled: false)") {
		t.Errorf("OfficeStatus(office.enabled false) = %q, want off (office.enabled: false)", got)
	}
	t.Setenv("PATH", t.TempDir())
	if got := OfficeStatus(context.Background(), on); !strings.HasPrefix(got, "not installed") || !strings.Contains(got, "libreoffice-writer") {
		t.Errorf("OfficeStatus(default) without soffice = %q, want not installed, naming the package", got)
	}
}

// TestOfficeStats: a scrape reports each process's memory by slot and
// every restart cause, those that never happened at 0.
func TestOfficeStats(t *testing.T) {
	t.Parallel()
	got := officeStats(office.Stats{
		Processes: []office.ProcessStats{{Slot: 0, RSS: 100}, {Slot: 1, RSS: 200}},
		Restarts:  map[string]int64{office.CauseTimeout: 2},
	})
	if len(got.RSS) != 2 || got.RSS[0] != 100 || got.RSS[1] != 200 {
		t.Errorf("officeStats(…).RSS = %v, want [100 200]", got.RSS)
	}
	for _, c := range office.Causes() {
		want := uint64(0)
		if c == office.CauseTimeout {
			want = 2
		}
		if n, ok := got.Restarts[c]; !ok || n != want {
			t.Errorf("officeStats(…).Restarts[%s] = %d, %v, want %d, true", c, n, ok, want)
		}
	}
}

// TestServeOfficeOff: with office.enabled false serve starts no
// LibreOffice, is ready without it, says so in its startup log, and
// answers an Office document 422 "not available".
func TestServeOfficeOff(t *testing.T) {
	shared := testenv.SharedDir(t, "../..")
	if shared == "" {
		testenv.Missing(t, "../shared is absent")
	}
	doc, err := os.ReadFile(filepath.Join(shared, "office", "word-google-docs.docx"))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	s := startService(t, writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\npool: {min: 0}\noffice: {enabled: false}\n", data)), nil)
	s.waitReady()
	if s.m.office != nil {
		t.Error("serve started LibreOffice with office.enabled: false")
	}
	if logs := s.logs.String(); !strings.Contains(logs, `"office":"off"`) {
		t.Errorf("startup log without \"office\":\"off\":\n%s", logs)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("file", "report.docx")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = part.Write(doc) // a bytes.Buffer does not fail
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.url+"/v1/convert", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(got), "Office conversion is not available on this server") {
		t.Errorf("POST /v1/convert = %d %s, want 422 Office conversion is not available on this server", resp.StatusCode, got)
	}
}
