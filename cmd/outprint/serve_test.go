package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/service"
	"github.com/outprint/outprint/internal/testenv"
)

// served is one `serve` running in the test process on a loopback port,
// through the command's own serve (the browser tests drive it).
type served struct {
	t    *testing.T
	url  string
	logs *testenv.Buffer
}

// writeConfig writes a YAML configuration and loads it as serve does.
func writeConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	return testenv.LoadConfig(t, yaml)
}

// startService runs the command's serve on cfg until the test ends.
func startService(t *testing.T, cfg *config.Config) *served {
	t.Helper()
	testenv.Require(t, "xelatex", "pdfinfo")
	// The listener is open once New returns; a free port is picked here
	// so that the URL is known before serve runs.
	cfg.Listen = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{t: t, url: "http://" + cfg.Listen, logs: &testenv.Buffer{}}
	code := make(chan int, 1)
	opts := service.Options{Logger: slog.New(slog.NewJSONHandler(s.logs, nil)), Formats: testFormats(t)}
	go func() { code <- serve(ctx, cfg, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-code:
			if c != exitOK {
				t.Errorf("serve exit = %d, want 0:\n%s", c, s.logs.String())
			}
		case <-time.After(2 * time.Minute):
			t.Errorf("serve did not stop")
		}
	})
	return s
}

// waitReady polls /readyz until the startup probe has rendered.
func (s *served) waitReady() {
	s.t.Helper()
	waitReady(s.t, s.url, nil, s.logs)
}

// TestServeConfigErrors: a wrong configuration stops serve at startup with
// exit code 2 and a message naming the setting.
func TestServeConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		file string
		want []string
	}{
		{"bad variable", map[string]string{"OUTPRINT_ADMISSION_SLOTS": "abc"}, "",
			[]string{"OUTPRINT_ADMISSION_SLOTS", `"abc"`}},
		{"anonymous on a public address", map[string]string{"OUTPRINT_LISTEN": "0.0.0.0:8080"}, "",
			[]string{"0.0.0.0:8080", "loopback", "OUTPRINT_LISTEN"}},
		{"unknown key", nil, "admission:\n  slot: 2\n", []string{"admission.slot", "slots"}},
		{"missing file", nil, "-", []string{"read configuration"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			args := []string{"serve"}
			switch tc.file {
			case "":
			case "-":
				args = append(args, "--config", filepath.Join(t.TempDir(), "missing.yaml"))
			default:
				path := filepath.Join(t.TempDir(), "outprint.yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, &stdout, &stderr)
			if code != exitUsage {
				t.Fatalf("run(%v) = %d, want %d; stderr:\n%s", args, code, exitUsage, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// TestConfigCheck: `outprint config check` prints the effective values
// with their origins, or every error with exit code 2.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("admission:\n  slots: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("admission:\n  slots: -1\n  queueDepth: many\n  previewSlots: -2\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"config", "check", good}, &stdout, &stderr); code != exitOK {
		t.Fatalf("config check good = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	// setup.sh installs the emoji image set; the check names it.
	for _, want := range []string{"slots: 3 # from " + good + ":2", "queueDepth: 4", "listen: 127.0.0.1:8080",
		"previewSlots: 0 # 0: page previews drawn at once, one per two CPUs, apart from the render slots", "# emoji: images from " + render.DefaultEmojiDir, "diagrams:\n  enabled: true", "# diagrams: drawn: Mermaid"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("config check output lacks %q:\n%s", want, stdout.String())
		}
	}

	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"config", "check", bad}, &stdout, &stderr); code != exitUsage {
		t.Fatalf("config check bad = %d, want 2", code)
	}
	for _, want := range []string{"admission.slots", "admission.queueDepth", "admission.previewSlots"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("config check errors lack %q:\n%s", want, stderr.String())
		}
	}

	t.Setenv("OUTPRINT_CONFIG", good)
	t.Setenv("OUTPRINT_ADMISSION_PER_USER", "2")
	t.Setenv("OUTPRINT_ADMISSION_PREVIEW_SLOTS", "2")
	stdout.Reset()
	if code := run(context.Background(), []string{"config", "check"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("config check with OUTPRINT_CONFIG = %d", code)
	}
	for _, want := range []string{"slots: 3", "perUser: 2 # from OUTPRINT_ADMISSION_PER_USER",
		"previewSlots: 2 # from OUTPRINT_ADMISSION_PREVIEW_SLOTS"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("config check output lacks %q:\n%s", want, stdout.String())
		}
	}
}

const serveKeys = `
auth:
  apiKeys:
    - {user: ann, tenant: acme, sha256: %s}
    - {user: bob, tenant: acme, sha256: %s}
`

// TestRestartTakesStoredFormat: `outprint serve` publishes the TeX format
// its pool dumped to pool.formatsDir, and a restarted process takes that
// format (a hard link of the stored file) instead of dumping it again,
// which would publish a new file in its place.
func TestRestartTakesStoredFormat(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex")
	store := filepath.Join(t.TempDir(), "formats")
	stored := func(when string) (ino, links uint64) {
		t.Helper()
		fmts, _ := filepath.Glob(filepath.Join(store, "*.fmt"))
		if len(fmts) != 1 {
			t.Fatalf("%s: formats in %s = %v, want the A4 one", when, store, fmts)
		}
		fi, err := os.Stat(fmts[0])
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return st.Ino, uint64(st.Nlink)
	}
	// Ready means the startup probe rendered, so the format is there.
	p := startRole(t, "serve", "OUTPRINT_POOL_FORMATS_DIR="+store)
	first, _ := stored("after the first start")
	p.stop()
	p.start()
	again, links := stored("after the restart")
	if again != first {
		t.Errorf("the restarted process published a new format (inode %d, was %d): it dumped again", again, first)
	}
	if links < 2 {
		t.Errorf("the stored format has %d link(s), want 2 or more: the restarted process did not take it", links)
	}
}
