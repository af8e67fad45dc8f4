package office

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

// The tools every conversion test needs: LibreOffice and python3-uno
// for the pool, poppler to look at the PDFs independently.
var tools = []string{"soffice", "pdftotext", "pdfinfo"}

// The pools of this test binary, started once and closed by TestMain:
// every file of the corpus is converted once, on one pool.
var shared struct {
	mu    sync.Mutex
	pools map[string]*Pool
	errs  map[string]error
	dirs  []string
}

// sharedPool returns the test binary's pool called name, started with cfg
// and warm, or skips (fails under CI) when LibreOffice is missing.
func sharedPool(t *testing.T, name string, cfg Config) *Pool {
	t.Helper()
	testenv.Require(t, tools...)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.pools == nil {
		shared.pools, shared.errs = map[string]*Pool{}, map[string]error{}
	}
	if err := shared.errs[name]; err != nil {
		t.Fatalf("pool %s: %v", name, err)
	}
	if p := shared.pools[name]; p != nil {
		return p
	}
	dir, err := os.MkdirTemp("", "ot-") // short: LibreOffice's sockets go in it
	if err != nil {
		t.Fatal(err)
	}
	shared.dirs = append(shared.dirs, dir)
	cfg.Dir = dir
	// Warnings (a process that stopped, a start that failed) go to the
	// test's output, for whoever reads a failure.
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := NewPool(context.Background(), cfg)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
		err = p.Warm(ctx)
		cancel()
		if err != nil {
			_ = p.Close() // the error is the start's
		}
	}
	if err != nil {
		if strings.Contains(err.Error(), "python3-uno") && !testenv.InCI() {
			shared.errs[name] = err
			testenv.Missing(t, err.Error())
		}
		shared.errs[name] = err
		t.Fatalf("NewPool(%s): %v", name, err)
	}
	shared.pools[name] = p
	return p
}

// mainPool is the pool of the corpus and concurrency tests: two slots, in
// namespaces where the kernel allows them.
func mainPool(t *testing.T) *Pool { return sharedPool(t, "main", Config{Slots: 2}) }

// orphanEnv names the folder of the pool TestOrphans's child process
// starts (the test binary run again) before it is killed.
const orphanEnv = "OUTPRINT_OFFICE_ORPHAN_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(orphanEnv); dir != "" {
		os.Exit(orphanChild(dir))
	}
	code := m.Run()
	shared.mu.Lock()
	for name, p := range shared.pools {
		dir, sockDir := p.dir, p.sockDir
		if err := p.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "close pool %s: %v\n", name, err)
			code = 1
		}
		// Nothing is left behind: no process that names the pool's
		// folder, no folder.
		if left := processesUnder(dir); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "pool %s: processes left after Close: %v\n", name, left)
			code = 1
		}
		for _, d := range []string{dir, sockDir} {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(os.Stderr, "pool %s: folder %s left after Close (%v)\n", name, d, err)
				code = 1
			}
		}
	}
	for _, d := range shared.dirs {
		_ = os.RemoveAll(d) // the pools' parents; checked empty above
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// processesUnder returns the live processes whose command line or working
// folder names dir (soffice.bin is started with its profile's URL).
func processesUnder(dir string) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue // a zombie holds nothing; its parent reaps it
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline") // gone meanwhile: empty
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")         // gone meanwhile: empty
		if bytes.Contains(cmdline, []byte(dir)) || strings.HasPrefix(cwd, dir) {
			out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// checkGroups fails the test when a process of p's folder is outside the
// process groups of p's current processes (a replaced process whose group
// was not killed whole).
func checkGroups(t *testing.T, p *Pool) {
	t.Helper()
	// A replacement starting in the background is a process of the pool
	// that no slot holds yet: wait until every slot has its own.
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
	defer cancel()
	if err := p.Warm(ctx); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	p.mu.Lock()
	groups := map[int]bool{}
	for _, s := range p.slots {
		if s.p != nil {
			groups[s.p.pid] = true
		}
	}
	p.mu.Unlock()
	for _, line := range processesUnder(p.dir) {
		pid, _ := strconv.Atoi(strings.Fields(line)[0])
		pgid, err := pgidOf(pid)
		if err != nil {
			continue // gone
		}
		if !groups[pgid] {
			t.Errorf("process %s (group %d) is left over: not in a current process's group %v", line, pgid, groups)
		}
	}
}

func pgidOf(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return strconv.Atoi(f[2])
}

// corpusDir is ../shared/office.
func corpusDir(t *testing.T) string {
	t.Helper()
	shared := testenv.SharedDir(t, "../..")
	if shared == "" {
		testenv.Missing(t, "../shared (the Office corpus) is absent")
	}
	return filepath.Join(shared, "office")
}

// expectation is one entry of ../shared/office/expect.json.
type expectation struct {
	Kind    string   `json:"kind"`
	Words   []string `json:"words"`
	Hostile *string  `json:"hostile"`
}

func loadExpect(t *testing.T) map[string]expectation {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir(t), "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]expectation
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func readCorpus(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pdfText is poppler's text of a PDF, NFKC-normalised with whitespace
// collapsed.
func pdfText(t *testing.T, pdf []byte) string {
	t.Helper()
	cmd := exec.Command("pdftotext", "-enc", "UTF-8", "-", "-")
	cmd.Stdin = bytes.NewReader(pdf)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pdftotext: %v", err)
	}
	return normalize(string(out))
}

func normalize(s string) string {
	return strings.Join(strings.Fields(norm.NFKC.String(s)), " ")
}

var pagesLine = regexp.MustCompile(`(?m)^Pages:\s+(\d+)`)

// pdfPages is pdfinfo's page count of a PDF file or bytes.
func pdfPages(t *testing.T, pdf []byte) int {
	t.Helper()
	cmd := exec.Command("pdfinfo", "-")
	cmd.Stdin = bytes.NewReader(pdf)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pdfinfo: %v", err)
	}
	m := pagesLine.FindSubmatch(out)
	if m == nil {
		t.Fatalf("pdfinfo printed no page count: %s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// pdfinfoField is one line of pdfinfo's output ("Page size").
func pdfinfoField(t *testing.T, pdf []byte, field string) string {
	t.Helper()
	cmd := exec.Command("pdfinfo", "-")
	cmd.Stdin = bytes.NewReader(pdf)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pdfinfo: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("pdfinfo printed no %s: %s", field, out)
	return ""
}

// kindOf returns the kind and code of a *limits.Error, "" for another
// error.
func kindOf(err error) (limits.Kind, string) {
	var le *limits.Error
	if errors.As(err, &le) {
		return le.Kind, le.Code()
	}
	return "", ""
}

// rewriteZip copies a ZIP-based document, passing every entry's data
// through edit (mimetype stays first and stored, as ODF wants).
func rewriteZip(t *testing.T, b []byte, edit func(name string, data []byte) []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var data bytes.Buffer
		if _, err := data.ReadFrom(rc); err != nil {
			t.Fatal(err)
		}
		_ = rc.Close() // read to the end
		method := zip.Deflate
		if f.Name == "mimetype" {
			method = zip.Store
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(edit(f.Name, data.Bytes())); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// buildZip writes entries in order (mimetype stored).
func buildZip(t *testing.T, entries [][2]string) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, e := range entries {
		method := zip.Deflate
		if e[0] == "mimetype" {
			method = zip.Store
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e[0], Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// trap is a loopback HTTP listener that counts every connection made to
// it: a document's links point at it, and nothing may dial it.
type trap struct {
	ln    net.Listener
	dials atomic.Int64
	done  chan struct{}
}

func startTrap(t *testing.T) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{ln: ln, done: make(chan struct{})}
	// The accept goroutine is owned by the test: Cleanup closes the
	// listener, which ends it, and waits.
	go func() {
		defer close(tr.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.dials.Add(1)
			_ = c.Close() // a trap answers nothing
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close() // ends the accept loop
		<-tr.done
	})
	return tr
}

func (tr *trap) url() string { return "http://" + tr.ln.Addr().String() }

// macroODT is an ODT whose Basic macro, bound to every document event a
// conversion may fire (load, layout, page count, "save a copy", which is
// how a PDF is written), writes marker: the file a converter that runs
// macros creates.
func macroODT(t *testing.T, marker string) []byte {
	t.Helper()
	return buildZip(t, [][2]string{
		{"mimetype", "application/vnd.oasis.opendocument.text"},
		{"META-INF/manifest.xml", `<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">
 <manifest:file-entry manifest:full-path="/" manifest:version="1.2" manifest:media-type="application/vnd.oasis.opendocument.text"/>
 <manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
 <manifest:file-entry manifest:full-path="Basic/script-lc.xml" manifest:media-type="text/xml"/>
 <manifest:file-entry manifest:full-path="Basic/Standard/script-lb.xml" manifest:media-type="text/xml"/>
 <manifest:file-entry manifest:full-path="Basic/Standard/Module1.xml" manifest:media-type="text/xml"/>
</manifest:manifest>`},
		{"content.xml", `<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:script="urn:oasis:names:tc:opendocument:xmlns:script:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:ooo="http://openoffice.org/2004/office" xmlns:dom="http://www.w3.org/2001/xml-events" office:version="1.2">
 <office:scripts><office:event-listeners>
  <script:event-listener script:language="ooo:script" script:event-name="dom:load" xlink:type="simple" xlink:href="vnd.sun.star.script:Standard.Module1.Main?language=Basic&amp;location=document"/>
  <script:event-listener script:language="ooo:script" script:event-name="office:load-finished" xlink:type="simple" xlink:href="vnd.sun.star.script:Standard.Module1.Main?language=Basic&amp;location=document"/>
  <script:event-listener script:language="ooo:script" script:event-name="office:view-created" xlink:type="simple" xlink:href="vnd.sun.star.script:Standard.Module1.Main?language=Basic&amp;location=document"/>
  <script:event-listener script:language="ooo:script" script:event-name="office:layout-finished" xlink:type="simple" xlink:href="vnd.sun.star.script:Standard.Module1.Main?language=Basic&amp;location=document"/>
  <script:event-listener script:language="ooo:script" script:event-name="office:page-count-change" xlink:type="simple" xlink:href="vnd.sun.star.script:Standard.Module1.Main?language=Basic&amp;location=document"/>
  <script:event-listener script:language="ooo:script" script:event-name="office:copy-to" xlink:type="simple" xlink:href="vnd.sun.star.script:Standard.Module1.Main?language=Basic&amp;location=document"/>
 </office:event-listeners></office:scripts>
 <office:body><office:text><text:p>Canary paragraph of a macro document</text:p></office:text></office:body>
</office:document-content>`},
		{"Basic/script-lc.xml", `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE library:libraries PUBLIC "-//OpenOffice.org//DTD OfficeDocument 1.0//EN" "libraries.dtd">
<library:libraries xmlns:library="http://openoffice.org/2000/library" xmlns:xlink="http://www.w3.org/1999/xlink">
 <library:library library:name="Standard" library:link="false"/>
</library:libraries>`},
		{"Basic/Standard/script-lb.xml", `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE library:library PUBLIC "-//OpenOffice.org//DTD OfficeDocument 1.0//EN" "library.dtd">
<library:library xmlns:library="http://openoffice.org/2000/library" library:name="Standard" library:readonly="false" library:passwordprotected="false">
 <library:element library:name="Module1"/>
</library:library>`},
		{"Basic/Standard/Module1.xml", `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE script:module PUBLIC "-//OpenOffice.org//DTD OfficeDocument 1.0//EN" "module.dtd">
<script:module xmlns:script="http://openoffice.org/2000/script" script:name="Module1" script:language="StarBasic">Sub Main
  Open &quot;` + marker + `&quot; For Output As #1
  Print #1, &quot;the macro ran&quot;
  Close #1
End Sub
</script:module>`},
	})
}
