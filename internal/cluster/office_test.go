package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/office"
	"github.com/outprint/outprint/internal/testenv"
)

// TestWorkerConvertRefusals: the worker's ConvertPath asks for the
// cluster secret, recognises the bundle's file again (it does not trust
// the gateway) and, without LibreOffice, answers an Office document 422
// "not available" — each in the error list the gateway reads back into
// the same *limits.Error (Remote.Convert). No LibreOffice runs here.
func TestWorkerConvertRefusals(t *testing.T) {
	tb := setup(t, false, limits.Render{})
	dir := testenv.SharedDir(t, "../..")
	if dir == "" {
		testenv.Missing(t, "../shared is absent")
	}
	docx, err := os.ReadFile(filepath.Join(dir, "office", "word-google-docs.docx"))
	if err != nil {
		t.Fatal(err)
	}
	post := func(secret string, b OfficeBundle) (int, []byte) {
		body, _ := json.Marshal(b)
		req, _ := http.NewRequest(http.MethodPost, tb.url+ConvertPath, bytes.NewReader(body))
		req.Header.Set(SecretHeader, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }() // read to the end below
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	for _, tc := range []struct {
		name   string
		secret string
		b      OfficeBundle
		status int
		want   string
	}{
		{"no secret", "", OfficeBundle{Doc: docx, Format: "docx"}, 401, "cluster secret"},
		{"plain text claimed to be a DOCX", testSecret, OfficeBundle{Doc: []byte("words"), Format: "docx"}, 415, `"format"`},
		{"bad options", testSecret, OfficeBundle{Doc: docx, Format: "docx", Options: json.RawMessage(`{"paper":"a5"}`)}, 422, "paper must be a4 or letter"},
		{"no LibreOffice", testSecret, OfficeBundle{Doc: docx, Format: "docx"}, 422, "Office conversion is not available on this server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(tc.secret, tc.b)
			if status != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("POST %s = %d %s, want %d with %q", ConvertPath, status, body, tc.status, tc.want)
			}
		})
	}

	// The gateway's side: Remote.Convert reads the worker's answer back
	// into the *limits.Error it wrote.
	rr, err := NewRemote(RemoteConfig{Workers: []string{tb.url}, Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rr.Convert(context.Background(), docx, office.Format{Name: "docx", Family: office.FamilyText}, office.Options{})
	var le *limits.Error
	if !errors.As(err, &le) || le.Kind != limits.KindDocument || !strings.Contains(le.Error(), "not available") {
		t.Errorf("Remote.Convert on a worker without LibreOffice = %v, want the worker's 422 as a *limits.Error", err)
	}
	if st := tb.adm.Stats(); st.Running != 0 || st.Tickets != 0 {
		t.Errorf("admission after the refusals = %+v, want every count given back", st)
	}
}
