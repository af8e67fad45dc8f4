package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/tex/textest"
)

// binary is the outprint command built once for these tests: they run it as
// a user would, with its real exit codes and output.
var binary string

// failpointEnv makes TestMain run the test binary as `outprint ROLE ...`
// (os.Args[1:]) whose job service kills the process with SIGKILL at the
// failpoint it names (jobs.Fail*). The shipped binary has no such switch:
// crash tests arm failpoints in Go, through service.Options.Failpoint.
const failpointEnv = "CMDTEST_FAILPOINT"

func TestMain(m *testing.M) {
	if point := os.Getenv(failpointEnv); point != "" {
		os.Exit(failpointMain(point))
	}
	dir, err := os.MkdirTemp("", "outprint-cli-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "outprint")
	// Without DWARF (-w), as make test links the test binaries: linking
	// it is most of this build's CPU, and no test reads it.
	if out, err := exec.Command("go", "build", "-ldflags=-w", "-o", binary, ".").CombinedOutput(); err != nil {
		_, _ = os.Stderr.Write(out)
		os.Exit(1)
	}
	// The zygote shim beside the binary, as `make build` and the image
	// place it: every process the tests start loads it instead of
	// compiling its own copy at its TeX pool's start. Without a C
	// compiler the pools fall back as they do in production.
	if out, err := exec.Command("bash", "../../scripts/shim.sh", "../../internal/tex/zygote/shim.c", dir).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "scripts/shim.sh: %v (the pools compile their own shims)\n%s", err, out)
	}
	// One formats folder for every outprint process the tests start, as
	// for the processes of one machine: the first to need a paper's
	// format dumps it, the others take it (pool.formatsDir). Without it
	// each process dumps into its own data folder, some 2.4 CPU-seconds
	// each. A test that sets OUTPRINT_POOL_FORMATS_DIR itself overrides it.
	if err := os.Setenv("OUTPRINT_POOL_FORMATS_DIR", filepath.Join(dir, "formats")); err != nil {
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(dir) // best effort: a temporary directory
	os.Exit(sharedFormats.Close(code))
}

// sharedFormats are the dumped formats of the services startService runs
// in this process (service.Options.Formats), one for this test binary;
// the outprint processes the tests start dump their own.
var sharedFormats textest.SharedFormats

// testFormats returns sharedFormats.
func testFormats(t testing.TB) *tex.Formats { t.Helper(); return sharedFormats.Get(t) }

// failpointMain is the command's main for a process of a role armed with
// a failpoint.
func failpointMain(point string) int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "failpoint mode: want a role and its arguments")
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := roleCmd(ctx, os.Args[1], os.Args[2:], os.Stdout, os.Stderr, killAt(point))
	fmt.Fprintf(os.Stderr, "failpoint mode: %s was never reached\n", point)
	return code
}

// killAt returns a failpoint hook that kills this process with SIGKILL at
// point.
func killAt(point string) func(string) {
	return func(name string) {
		if name != point {
			return
		}
		fmt.Fprintf(os.Stderr, "failpoint %s reached: killing the process\n", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL to oneself is delivered before this returns
	}
}

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

func TestRenderCommand(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex", "pdfinfo")
	dir := t.TempDir()
	out := filepath.Join(dir, "note.pdf")
	_, stderr, code := runCLI(t, "render", "testdata/note.md", "-o", out)
	if code != exitOK {
		t.Fatalf("outprint render note.md exit = %d, want 0\n%s", code, stderr)
	}
	info, err := exec.Command("pdfinfo", out).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo: %v\n%s", err, info)
	}
	if !regexp.MustCompile(`(?m)^Pages:\s+1$`).Match(info) || !regexp.MustCompile(`(?m)^Title:\s+CLI note$`).Match(info) {
		t.Errorf("pdfinfo = %s, want 1 page titled CLI note", info)
	}
}

func TestRenderCommandErrors(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex")
	tests := []struct {
		name     string
		args     []string
		code     int
		stderrRE string
	}{
		{"no command", nil, exitUsage, `usage:`},
		{"unknown command", []string{"paint"}, exitUsage, `unknown command "paint"`},
		{"no file", []string{"render"}, exitUsage, `exactly one Markdown file`},
		{"two files", []string{"render", "a.md", "b.md"}, exitUsage, `exactly one Markdown file`},
		{"missing file", []string{"render", "testdata/nope.md"}, exitUsage, `no such file`},
		{"bad flag", []string{"render", "--colour", "testdata/note.md"}, exitUsage, `flag provided but not defined`},
		{"math", []string{"render", "testdata/badmath.md", "-o", os.DevNull}, exitDocument, `(?m)^testdata/badmath.md:5: .*\\input`},
		{"metadata", []string{"render", "testdata/badmeta.md", "-o", os.DevNull}, exitDocument, `(?m)^testdata/badmeta.md:2: title.*\n^testdata/badmeta.md:3: unknown metadata field "colour"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tt.args...)
			if code != tt.code {
				t.Errorf("outprint %v exit = %d, want %d\n%s", tt.args, code, tt.code, stderr)
			}
			if !regexp.MustCompile(tt.stderrRE).MatchString(stderr) {
				t.Errorf("outprint %v stderr = %q, want match %q", tt.args, stderr, tt.stderrRE)
			}
		})
	}
}

func TestRenderCommandJSON(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex")
	stdout, stderr, code := runCLI(t, "render", "testdata/badmath.md", "--json", "-o", os.DevNull)
	if code != exitDocument {
		t.Fatalf("exit = %d, want %d\n%s", code, exitDocument, stderr)
	}
	var body struct {
		Errors []limits.Problem `json:"errors"`
	}
	if err := json.Unmarshal([]byte(stdout), &body); err != nil {
		t.Fatalf("stdout is not the error list: %v\n%s", err, stdout)
	}
	if len(body.Errors) != 1 || body.Errors[0].Line != 5 || body.Errors[0].Source != limits.SourceDocument {
		t.Errorf("errors = %+v, want one document error on line 5", body.Errors)
	}
	if !strings.Contains(stdout, `"line":5`) || !strings.Contains(stdout, `"field":`) {
		t.Errorf("JSON lacks the SPEC §5 shape: %s", stdout)
	}
}

func TestRenderCommandTooLarge(t *testing.T) {
	t.Parallel()
	big := filepath.Join(t.TempDir(), "big.md")
	if err := os.WriteFile(big, []byte(strings.Repeat("word ", limits.MaxMarkdownBytes/5+10)), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runCLI(t, "render", big, "--json", "-o", os.DevNull)
	if code != exitDocument || !strings.Contains(stdout, `"code":"too_large"`) {
		t.Errorf("exit = %d, stdout = %s, want 1 and too_large", code, stdout)
	}
	// The message gives the file's real size, not the bound plus one.
	size := fmt.Sprintf("%d bytes", 5*(limits.MaxMarkdownBytes/5+10))
	if !strings.Contains(stdout, size) {
		t.Errorf("stdout = %s, want the size %q", stdout, size)
	}
}

// waitReady polls url's /readyz until it answers 200 (the process's TeX
// probe passed), failing the test with the process's logs when exited
// closes first or the wait runs out.
func waitReady(t testing.TB, url string, exited <-chan struct{}, logs fmt.Stringer) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("the process's log:\n%s", logs)
		}
	}()
	testenv.Eventually(t, url+"/readyz to answer 200", func() bool {
		select {
		case <-exited:
			t.Fatalf("the process at %s exited before it was ready", url)
		default:
		}
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}
