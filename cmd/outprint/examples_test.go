package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/testenv"
)

// The shell examples of README.md and docs/*.md are run as a newcomer
// would paste them, exactly as written: the ones that talk to
// http://127.0.0.1:8080 against `outprint serve` on its embedded defaults
// (in a network namespace of their own, so that the port is the test's
// alone), in the order the documents give them, in one shell; the command
// line ones in a folder with the files they name. An example that needs
// what a test cannot give it here is listed in exampleElsewhere with the
// reason and the test that covers it instead, and a new example must be
// listed in one of the two.

// shellBlock is one ```sh block of a document.
type shellBlock struct {
	file string
	line int
	text string
}

func (b shellBlock) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// firstLine is a block's first line: what exampleRun and exampleElsewhere
// know it by.
func (b shellBlock) firstLine() string { l, _, _ := strings.Cut(b.text, "\n"); return l }

// shellBlocks returns every ```sh block of README.md and docs/*.md, in
// order, as goldmark reads them.
func shellBlocks(t *testing.T) []shellBlock {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []shellBlock
	for _, f := range append([]string{"../../README.md"}, files...) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc := goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser().Parse(text.NewReader(src))
		// The walker never returns an error.
		_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			fc, ok := n.(*ast.FencedCodeBlock)
			if !entering || !ok || string(fc.Language(src)) != "sh" {
				return ast.WalkContinue, nil
			}
			var b strings.Builder
			lines := fc.Lines()
			for i := range lines.Len() {
				seg := lines.At(i)
				b.Write(seg.Value(src))
			}
			start := lines.At(0).Start
			out = append(out, shellBlock{file: strings.TrimPrefix(f, "../../"), line: strings.Count(string(src[:start]), "\n") + 1, text: b.String()})
			return ast.WalkContinue, nil
		})
	}
	return out
}

// How the examples run, by their first line.
const (
	exServe   = "serve"   // against outprint serve on 127.0.0.1:8080
	exKeyed   = "keyed"   // the same with an API key in $KEY (webhooks)
	exCluster = "cluster" // the cluster walkthrough, with PostgreSQL
	exCLI     = "cli"     // the command line, in a folder with doc.md and meta.json
	exRepo    = "repo"    // in the repository's root
)

func exampleRun(first string) string {
	switch first {
	case "curl -sf -o showcase.pdf \\",
		"job=$(curl -s -o /dev/null -w '%header{location}' -F document=@examples/showcase.md \\",
		"curl -sN http://127.0.0.1:8080$job/events   # $job: /v1/jobs/{id}, as above",
		"curl -s -F pdf=@examples/onboarding-form.pdf http://127.0.0.1:8080/v1/forms/fields",
		"curl -s -F pdf=@examples/onboarding-form.pdf -F values=@examples/onboarding-values.json \\",
		"curl -F file=@report.docx http://localhost:8080/v1/convert -o report.pdf":
		return exServe
	case `curl -s -H "Authorization: Bearer $KEY" -F document=@report.md \`:
		return exKeyed
	case "createdb -h 127.0.0.1 -U postgres outprint":
		return exCluster
	case "bin/outprint render doc.md                 # writes doc.pdf",
		"bin/outprint fields examples/onboarding-form.pdf         # name, type, page, value, options",
		"bin/outprint convert report.docx            # writes report.pdf; -o OUT.pdf, --metadata META.json, --json":
		return exCLI
	case "cd deploy/prometheus && promtool check rules alerts.yaml && promtool test rules alerts_test.yaml":
		return exRepo
	}
	return ""
}

// exampleElsewhere are the examples not run here: why, and what runs
// them or the same thing.
func exampleElsewhere(first string) string {
	switch {
	case strings.HasPrefix(first, "make run"):
		return "installs packages (scripts/setup.sh) and runs until Ctrl-C; scripts/run.sh is what the serve examples here start by hand"
	case strings.HasPrefix(first, "docker build"):
		return "internal/imagetest builds and runs the image (the lead runs it)"
	case strings.HasPrefix(first, "curl -s -X POST https://wiki.example.com/"):
		return "needs an Outline at wiki.example.com; TestProxyRecipes checks the routes, httpapi's collection tests the job"
	}
	return ""
}

// TestShellExamples runs the documents' shell examples; see above.
func TestShellExamples(t *testing.T) {
	t.Parallel()
	testenv.Require(t, "xelatex", "curl", "unshare", "ip", "pdfinfo", "promtool", "timeout")
	blocks := shellBlocks(t)
	if len(blocks) < 10 {
		t.Fatalf("found %d shell examples, want every one of README.md and docs/*.md", len(blocks))
	}
	groups := map[string][]shellBlock{}
	for _, b := range blocks {
		run, why := exampleRun(b.firstLine()), exampleElsewhere(b.firstLine())
		switch {
		case run != "":
			groups[run] = append(groups[run], b)
		case why != "":
			t.Logf("%s (%s): not run here: %s", b, b.firstLine(), why)
		default:
			t.Errorf("%s: a shell example this test does not know (%q): run it in exampleRun or say why not in exampleElsewhere", b, b.firstLine())
		}
	}
	moduleRoot, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// A folder as a newcomer's clone looks to the examples: examples/ and
	// bin/outprint, and the files the command-line examples name.
	folder := func(t *testing.T) string {
		dir := t.TempDir()
		if err := os.Symlink(filepath.Join(moduleRoot, "examples"), filepath.Join(dir, "examples")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Dir(binary), filepath.Join(dir, "bin")); err != nil {
			t.Fatal(err)
		}
		for name, text := range map[string]string{"doc.md": "# A document\n\nIts text.\n", "meta.json": `{"author": "Ann", "paper": "letter"}`} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The report.docx of "Office documents": a real one of
		// ../shared/office.
		docx, err := os.ReadFile(sharedOffice(t, "word-google-docs.docx"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "report.docx"), docx, 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	script := func(bs []shellBlock) string {
		var b strings.Builder
		for _, blk := range bs {
			fmt.Fprintf(&b, "echo '### %s' >&2\n%s\n", blk, blk.text)
		}
		return b.String()
	}
	shell := func(t *testing.T, dir, body string, env ...string) (string, error) {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", body)
		cmd.Dir = dir
		cmd.Env = append(cleanEnv(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	pdfs := func(t *testing.T, dir string, want ...string) {
		t.Helper()
		for _, name := range want {
			if out, err := exec.Command("pdfinfo", filepath.Join(dir, name)).CombinedOutput(); err != nil {
				t.Errorf("%s after the examples: pdfinfo: %v\n%s", name, err, out)
			}
		}
	}

	// serve on its embedded defaults (127.0.0.1:8080, ./outprint-data)
	// in a network namespace of its own, then the examples; every request
	// they make succeeds, but for what they say they wait on: the wait for
	// /readyz here, and the Jobs example's poll of a result until the job
	// succeeded.
	againstServe := func(t *testing.T, dir string, blocks []shellBlock, serveArgs string, env ...string) {
		t.Helper()
		body := `ip link set lo up
bin/outprint serve ` + serveArgs + ` 2>serve.log &
pid=$!
trap 'kill -TERM $pid; wait $pid' EXIT
until curl -sf -o /dev/null http://127.0.0.1:8080/readyz; do kill -0 $pid; sleep 0.2; done
` + script(blocks)
		out, err := shell(t, dir, "unshare -n bash -euo pipefail -c "+shellQuote(body), env...)
		if err != nil {
			t.Errorf("the examples: %v\n%s", err, tailString(out, 4000))
		}
		log, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
		expected := []string{`"status":503,"err":"not ready`, `"status":409,"err":"job result not ready`}
		for _, l := range strings.Split(string(log), "\n") {
			if !strings.Contains(l, `"msg":"request refused"`) && !strings.Contains(l, `"msg":"request failed"`) {
				continue
			}
			if !slices.ContainsFunc(expected, func(e string) bool { return strings.Contains(l, e) }) {
				t.Errorf("an example was refused: %s", l)
			}
		}
	}
	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		dir := folder(t)
		againstServe(t, dir, groups[exServe], "")
		pdfs(t, dir, "showcase.pdf", "memo.pdf", "onboarding-form-filled.pdf", "report.pdf")
	})
	t.Run("keyed", func(t *testing.T) {
		t.Parallel()
		// An API key of tenant acme with a webhook secret, as "Webhooks"
		// shows; the callbacks go nowhere (no network here), which the
		// acceptance of the jobs does not wait for.
		dir := folder(t)
		const key = "example-key-0123456789"
		yml := fmt.Sprintf("auth:\n  apiKeys:\n    - user: alice\n      tenant: acme\n      sha256: %s\n      webhookSecrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]\n", config.KeyDigest(key))
		for name, text := range map[string]string{"outprint.yaml": yml, "report.md": "# Report\n\nThe quarter in one line.\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		againstServe(t, dir, groups[exKeyed], "--config outprint.yaml", "KEY="+key)
		log, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
		if n := strings.Count(string(log), `"path":"/v1/jobs","status":202`); n != 2 {
			t.Errorf("jobs accepted with a callback = %d, want the example's 2:\n%s", n, grepLines(string(log), "/v1/jobs"))
		}
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		// The walkthrough's fixed ports in a network namespace of its own,
		// its /tmp/op a tmpfs of a mount namespace of its own, and the
		// machine's PostgreSQL reached through its Unix socket as
		// 127.0.0.1:5432; the database it creates is dropped after.
		testenv.Require(t, "socat", "createdb", "dropdb")
		testenv.PostgresDatabase(t, "examples") // PostgreSQL runs (fails under CI if not)
		dir := folder(t)
		if err := os.Symlink(filepath.Join(moduleRoot, "scripts"), filepath.Join(dir, "scripts")); err != nil {
			t.Fatal(err)
		}
		const socket = "/var/run/postgresql/.s.PGSQL.5432"
		if _, err := os.Stat(socket); err != nil {
			t.Fatalf("PostgreSQL's socket: %v", err)
		}
		body := `mkdir -p /tmp/op && mount -t tmpfs tmpfs /tmp/op
ip link set lo up
socat TCP-LISTEN:5432,bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:` + socket + ` &
until (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; do sleep 0.1; done
cleanup() { kill $(jobs -p) 2>/dev/null || true; wait || true; }
trap cleanup EXIT
dropdb -h 127.0.0.1 -U postgres --if-exists outprint
` + script(groups[exCluster]) + `
dropdb -h 127.0.0.1 -U postgres --force outprint
`
		out, err := shell(t, dir, "timeout 900 unshare -n -m --propagation private bash -euo pipefail -c "+shellQuote(body))
		if err != nil {
			t.Errorf("the cluster walkthrough: %v\n%s", err, tailString(out, 6000))
		}
		pdfs(t, dir, "hello.pdf", "onboarding-form-filled.pdf")
	})
	t.Run("cli", func(t *testing.T) {
		t.Parallel()
		dir := folder(t)
		if out, err := shell(t, dir, script(groups[exCLI])); err != nil {
			t.Errorf("the command-line examples: %v\n%s", err, tailString(out, 4000))
		}
		pdfs(t, dir, "doc.pdf", "out.pdf", "filled.pdf", "report.pdf")
	})
	t.Run("repo", func(t *testing.T) {
		t.Parallel()
		if out, err := shell(t, moduleRoot, script(groups[exRepo])); err != nil {
			t.Errorf("the examples run in the repository: %v\n%s", err, tailString(out, 4000))
		}
	})
}

// cleanEnv is the test's environment without OUTPRINT_* settings, so that
// serve runs on its embedded defaults as after a fresh clone.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTPRINT_") {
			out = append(out, kv)
		}
	}
	return out
}

// shellQuote quotes s as one word for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
