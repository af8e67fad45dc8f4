package imagetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/programs"
)

// TestImageContents: the image holds every program outprint runs
// (internal/programs) and none that only tests use, the zygote shim of
// this source and no C compiler, and runs as a user of its own.
func TestImageContents(t *testing.T) {
	b := setup(t)
	t.Logf("image built in %s (log %s)", b.buildTime.Round(time.Second), b.buildLog)
	size, err := strconv.ParseInt(b.run(t, "image", "inspect", "--format", "{{.Size}}", image), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image size: %d bytes (%.2f GB)", size, float64(size)/1e9)

	var names []string
	for _, p := range programs.Serving() {
		names = append(names, p.Name)
	}
	// `which` prints the path of each program it finds, and exits non-zero
	// when one is missing.
	out, err := b.try(append([]string{"run", "--rm", "--entrypoint", "which", image}, names...)...)
	found := strings.Fields(out)
	for _, n := range names {
		if !slices.ContainsFunc(found, func(p string) bool { return filepath.Base(p) == n }) {
			t.Errorf("%s is not in the image (which: %v)", n, err)
		}
	}

	// Chromium is in: it draws Mermaid diagrams (programs.Chromium).
	absent := []string{"java", "pdftk", "pandoc", "promtool", "prometheus", "gcc", "cc", "node", "npm", "go"}
	out, _ = b.try(append([]string{"run", "--rm", "--entrypoint", "which", image}, absent...)...)
	if out != "" {
		t.Errorf("the image has programs only tests use: %s", strings.Join(strings.Fields(out), " "))
	}

	src, err := os.ReadFile(filepath.Join(moduleRoot, "internal", "tex", "zygote", "shim.c"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	shim := "zygote-" + hex.EncodeToString(sum[:8]) + ".so"
	if out := b.run(t, "run", "--rm", "--entrypoint", "ls", image, "/usr/local/lib/outprint"); !slices.Contains(strings.Fields(out), shim) {
		t.Errorf("/usr/local/lib/outprint holds %q, want the shim of this source, %s", out, shim)
	}

	if out := b.run(t, "run", "--rm", "--entrypoint", "id", image, "-u"); out != "10001" {
		t.Errorf("the image runs as uid %s, want 10001", out)
	}
}

// TestImageServe runs `outprint serve` from the image as compose.yaml runs
// its roles: a read-only root file system and no writable /tmp (podman's
// usual tmpfs on /tmp is turned off, and TMPDIR points at /tmp, so nothing
// can fall back on it), the data folder a 256 MiB tmpfs, SPEC's container
// limits. Through its API: the corpus's handbook with an SVG and an emoji,
// a form filled, Office documents converted by LibreOffice, a job and its
// page preview; the pool forks its warm TeX
// processes from zygotes with the prebuilt shim.
func TestImageServe(t *testing.T) {
	b := setup(t)
	key, cfg := apiKey(t)
	cfgPath := filepath.Join(t.TempDir(), "outprint.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	name := uniqueName("outprint-imagetest-serve")
	b.run(t, "run", "-d", "--name", name,
		"--read-only", "--read-only-tmpfs=false",
		"--tmpfs", "/var/lib/outprint:size=256m,mode=1777", // compose.yaml's
		"--memory", "1g", "--cpus", "1", "--pids-limit", "512", // compose.yaml's worker
		"-v", cfgPath+":/etc/outprint/outprint.yaml:ro",
		"-e", "OUTPRINT_CONFIG=/etc/outprint/outprint.yaml",
		"-e", "TMPDIR=/tmp",
		"-p", "127.0.0.1::8080",
		image, "serve")
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := b.try("logs", "--tail", "60", name)
			t.Logf("serve's log:\n%s", logs)
		}
		// A container left behind costs resources, not the result.
		if _, err := b.try("rm", "-f", "-t", "5", name); err != nil {
			t.Logf("remove container %s: %v", name, err)
		}
	})
	port := b.run(t, "port", name, "8080")
	base := "http://" + strings.TrimSpace(strings.Split(port, "\n")[0])
	waitReady(t, base, 4*time.Minute, func() error {
		if state, err := b.try("inspect", "--format", "{{.State.Status}}", name); err != nil || state != "running" {
			return fmt.Errorf("the container is %s (%v)", state, err)
		}
		return nil
	})

	// No writable /tmp: the scratch files must go to the data folder.
	if _, err := b.try("exec", name, "sh", "-c", "echo > /tmp/outprint-imagetest"); err == nil {
		t.Fatal("/tmp is writable in the container; the test must run without a writable /tmp")
	}

	c := newClient(base, key)
	t.Run("render", func(t *testing.T) { renderHandbook(t, c) })
	t.Run("diagrams", func(t *testing.T) { renderDiagrams(t, c) })
	t.Run("form", func(t *testing.T) { fillForm(t, c) })
	t.Run("office", func(t *testing.T) { convertOffice(t, c) })
	t.Run("job", func(t *testing.T) {
		id := runJob(t, c, "A job on serve")
		preview(t, c, id)
	})
	t.Run("zygotes", func(t *testing.T) {
		_, _, body := c.do(t, "GET", "/metrics", "", nil)
		metrics := string(body)
		for _, want := range []string{"outprint_tex_pool_zygote_enabled 1"} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %q: the pool does not fork from zygotes with the image's shim", want)
			}
		}
	})
}
