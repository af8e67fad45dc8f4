package service

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/outprint/outprint/internal/diagram"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/testenv"
)

const diagramDoc = "# Pipeline\n\n```mermaid\nflowchart LR\n    Ingest --> Typeset\n```\n\nDone.\n"

// requireDiagrams fails (under CI) or skips without Chromium and Mermaid.
func requireDiagrams(t *testing.T) {
	t.Helper()
	testenv.Require(t, "chromium", "pdftotext", "prlimit")
	if _, err := os.Stat(filepath.Join(diagram.DefaultMermaidDir, "mermaid.min.js")); err != nil {
		testenv.Missing(t, "mermaid is not installed (run scripts/mermaid.sh)")
	}
}

// pdfText is pdftotext's reading of pdf.
func pdfText(t *testing.T, pdf []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.pdf")
	if err := os.WriteFile(path, pdf, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdftotext", path, "-").CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext: %v\n%s", err, out)
	}
	return string(out)
}

// TestServeDiagrams: serve draws diagrams in a synchronous render and in a
// job, from one browser pool whose processes end with the service.
func TestServeDiagrams(t *testing.T) {
	requireDiagrams(t)
	data := filepath.Join(t.TempDir(), "data")
	s := startService(t, writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\npool: {min: 0}\n%s", data, officeOff)), nil)
	s.waitReady()
	if s.m.drawer == nil {
		t.Fatal("serve has no diagram drawer with diagrams.enabled left out")
	}
	if st := s.m.drawer.Stats(); st.Started != 0 {
		t.Errorf("browsers started before any diagram: %d", st.Started)
	}

	r := <-s.render("", diagramDoc)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("POST /v1/render = %d %v %s\n%s", r.status, r.err, r.body, s.logs.String())
	}
	if text := pdfText(t, r.body); !strings.Contains(text, "Ingest") || strings.Contains(text, "-->") {
		t.Errorf("sync render text = %q, want the label Ingest and no source", text)
	}

	// A job with another diagram (a cached one would prove nothing).
	j := s.waitJob(s.submit(strings.Replace(diagramDoc, "Typeset", "Queue", 1)).ID)
	if j.State != jobs.StateSucceeded {
		t.Fatalf("job = %+v, want succeeded", j)
	}
	resp, err := http.Get(s.url + "/v1/jobs/" + j.ID + "/result")
	if err != nil {
		t.Fatal(err)
	}
	pdf, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // read to the end already
	if text := pdfText(t, pdf); !strings.Contains(text, "Queue") || strings.Contains(text, "-->") {
		t.Errorf("job result text = %q, want the label Queue and no source", text)
	}

	st := s.m.drawer.Stats()
	if st.Started == 0 || len(st.Pids) == 0 {
		t.Fatalf("drawer stats after two diagrams = %+v, want a browser", st)
	}
	s.stop()
	if code := s.exited(); code != exitOK {
		t.Fatalf("serve exit = %d\n%s", code, s.logs.String())
	}
	for _, pid := range st.Pids {
		// The browser led its own process group: nothing of it runs.
		if left := groupLive(t, pid); len(left) > 0 {
			t.Errorf("after shutdown the browser's process group %d still has %v running", pid, left)
		}
	}
}

// groupLive lists the processes of group pgid that are not zombies
// (zombies of a killed group wait for the machine's init to reap them;
// they run nothing).
func groupLive(t *testing.T, pgid int) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		// state ppid pgrp, after the command name.
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			live = append(live, e.Name()+" "+f[0])
		}
	}
	return live
}

// TestServeDiagramsOff: diagrams.enabled false prints the fence as code
// and starts no drawer.
func TestServeDiagramsOff(t *testing.T) {
	testenv.Require(t, "pdftotext")
	data := filepath.Join(t.TempDir(), "data")
	s := startService(t, writeConfig(t, fmt.Sprintf("listen: 127.0.0.1:0\ndataDir: %s\npool: {min: 0}\ndiagrams: {enabled: false}\n%s", data, officeOff)), nil)
	s.waitReady()
	if s.m.drawer != nil {
		t.Error("serve made a drawer with diagrams.enabled: false")
	}
	r := <-s.render("", diagramDoc)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("POST /v1/render = %d %v %s", r.status, r.err, r.body)
	}
	if text := pdfText(t, r.body); !strings.Contains(text, "Ingest --> Typeset") {
		t.Errorf("render text = %q, want the listing", text)
	}
}
