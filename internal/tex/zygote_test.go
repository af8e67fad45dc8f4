package tex

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/testenv"
)

// newZygotePool returns a pool with a zygote of testPreamble ready, and
// that zygote.
func newZygotePool(t *testing.T, cfg PoolConfig) (*Pool, *zygote) {
	t.Helper()
	requireGCC(t)
	cfg.Min = 1
	cfg.Preambles = []string{testPreamble}
	p := newTestPool(t, cfg)
	waitFor(t, "a zygote", func() bool {
		s := p.Stats()
		if s.ZygoteOff != "" || s.ZygoteFailures > 0 {
			t.Fatalf("no zygote: %+v", s)
		}
		return s.Zygotes > 0
	})
	// The process Min warmed before the zygote was ready is a warm
	// process of its own: a render uses it up, and slots for the
	// zygote's children replace it.
	// With Forks 1 each fork retires the zygote, and until its successor
	// is ready the pool warms processes of its own: on a loaded machine
	// that takes more than a render or two (CI once needed more than 3).
	for range 10 {
		if newestIsSlot(p) {
			break
		}
		if _, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "x"}); err != nil {
			t.Fatalf("Run = %v", err)
		}
		waitFor(t, "a warm process or slot and a zygote", func() bool { s := p.Stats(); return s.Warm > 0 && s.Zygotes > 0 })
	}
	if !newestIsSlot(p) {
		t.Fatalf("no slot for a zygote's child: %+v", p.Stats())
	}
	return p, servingZygote(p)
}

// newestIsSlot reports whether the next render of testPreamble gets a
// zygote's child.
func newestIsSlot(p *Pool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.profileLocked(testPreamble).warm
	return len(w) > 0 && w[len(w)-1].goW != nil
}

func requireGCC(t *testing.T) {
	t.Helper()
	testenv.Require(t, "gcc", "xelatex", "pdfinfo", "pdftotext")
}

// servingZygote is the zygote testPreamble's children are forked from.
func servingZygote(p *Pool) *zygote {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.profileLocked(testPreamble).zygotes.ready
	if len(r) == 0 {
		return nil
	}
	return r[0]
}

// child is a zygote's child started by a test, without a pool render
// around it: its output lines arrive on lines.
type child struct {
	p     *proc
	dir   string
	mu    sync.Mutex
	lines []string
	news  chan struct{}
}

// forkTest forks a child of z in a new folder that typesets body, with
// goTeX as its go.tex ("" for the usual one) and cpu seconds of CPU. The
// body may wait with \openin on ./hold.tex, a FIFO, until release.
func forkTest(t *testing.T, p *Pool, z *zygote, body, goTeX string, cpu uint64) *child {
	t.Helper()
	dir, err := os.MkdirTemp(p.cfg.Runner.TempDir, "outprint-test-child-")
	if err != nil {
		t.Fatal(err)
	}
	nonce := newNonce()
	if goTeX == "" {
		goTeX = childGo(time.Now(), nonce, 500)
	}
	if err := writeFile(dir, "body.tex", bodyFile(body)); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(dir, "go.tex", goTeX); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "hold.tex"), 0o600); err != nil {
		t.Fatal(err)
	}
	drv, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = drv.Close() }()
	goR, goW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = goR.Close() }()
	defer func() { _ = goW.Close() }()
	c := &child{dir: dir, news: make(chan struct{}, 1)}
	c.p, err = p.spawn(z, dir, drv, goR, cpu, false, func(s string) {
		c.mu.Lock()
		c.lines = append(c.lines, s)
		c.mu.Unlock()
		select {
		case c.news <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	t.Cleanup(func() {
		c.p.killGroup()
		c.p.reap()
	})
	if _, err := goW.Write([]byte{'g'}); err != nil {
		t.Fatalf("go: %v", err)
	}
	return c
}

// waitLine waits until the child printed a line containing s.
func (c *child) waitLine(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		for _, l := range c.lines {
			if strings.Contains(l, s) {
				c.mu.Unlock()
				return
			}
		}
		c.mu.Unlock()
		select {
		case <-c.news:
		case <-c.p.exited:
			// The reader may still be passing on the last lines: wait
			// until it has passed s on or read the output to its end.
			found := func() bool {
				c.mu.Lock()
				defer c.mu.Unlock()
				return strings.Contains(strings.Join(c.lines, "\n"), s)
			}
			testenv.EventuallyWithin(t, 10*time.Second, fmt.Sprintf("the child's output ends or holds %q", s), func() bool {
				select {
				case <-c.p.readDone:
					return true
				default:
					return found()
				}
			})
			if !found() {
				t.Fatalf("child exited without printing %q:\n%s", s, c.p.output())
			}
			return
		case <-deadline:
			t.Fatalf("child printed no %q in 60 s:\n%s", s, c.p.output())
		}
	}
}

// line returns the first line containing prefix.
func (c *child) line(prefix string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if i := strings.Index(l, prefix); i >= 0 {
			return l[i:]
		}
	}
	return ""
}

// release lets a child waiting on hold.tex go on.
func (c *child) release(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(c.dir, "hold.tex"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("go on, go on\n"))
	_ = f.Close()
}

// finish releases the child (when it waits) and waits for its exit.
func (c *child) finish(t *testing.T) *os.ProcessState {
	t.Helper()
	state, cause := c.p.wait(context.Background(), c.dir, 1<<30, nil, nil)
	if cause != nil {
		t.Fatalf("child: %v", cause)
	}
	return state
}

// encodings are the forms a string may take in XeTeX's memory: UTF-8
// (stdio buffers, C strings), UTF-16 (the string pool) and UTF-32 (the
// input buffer).
func encodings(s string) [][]byte {
	u8 := []byte(s)
	var u16, u32 []byte
	for _, r := range utf16.Encode([]rune(s)) {
		u16 = append(u16, byte(r), byte(r>>8))
	}
	for _, r := range s {
		u32 = append(u32, byte(r), byte(r>>8), byte(r>>16), byte(r>>24))
	}
	return [][]byte{u8, u16, u32}
}

// writable returns pid's writable mappings ("rw"), as [start, end) pairs
// with their names.
func writable(t *testing.T, pid int) (spans [][2]uint64, names []string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatalf("maps: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !strings.HasPrefix(f[1], "rw") {
			continue
		}
		var lo, hi uint64
		_, _ = fmt.Sscanf(f[0], "%x-%x", &lo, &hi)
		name := ""
		if len(f) >= 6 {
			name = f[5]
		}
		spans = append(spans, [2]uint64{lo, hi})
		names = append(names, name)
	}
	return spans, names
}

// scanMemory reads every writable mapping of pid through /proc/PID/mem and
// calls fn with each mapping's bytes.
func scanMemory(t *testing.T, pid int, fn func(name string, b []byte)) {
	t.Helper()
	spans, names := writable(t, pid)
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatalf("mem: %v", err)
	}
	defer func() { _ = mem.Close() }()
	for i, s := range spans {
		buf := make([]byte, s[1]-s[0])
		n, _ := mem.ReadAt(buf, int64(s[0]))
		fn(names[i], buf[:n])
	}
}

// memoryHas reports whether pid's writable memory holds s in any of its
// encodings.
func memoryHas(t *testing.T, pid int, s string) bool {
	t.Helper()
	found := false
	scanMemory(t, pid, func(_ string, b []byte) {
		for _, e := range encodings(s) {
			if bytes.Contains(b, e) {
				found = true
			}
		}
	})
	return found
}

// memoryCopy copies pid's writable memory but its stack (where the shim
// receives requests), mapping by mapping.
func memoryCopy(t *testing.T, pid int) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	i := 0
	scanMemory(t, pid, func(name string, b []byte) {
		if name == "[stack]" {
			return
		}
		out[fmt.Sprintf("%d %s (%d bytes)", i, name, len(b))] = b
		i++
	})
	return out
}

// onlyRseq reports whether a and b differ only in what the kernel writes
// by itself: the CPU number fields (cpu_id_start, cpu_id) of the thread's
// rseq area, which glibc registers and the kernel updates whenever the
// thread runs on another core.
func onlyRseq(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	at := -1
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		if at < 0 {
			at = i &^ 31 // struct rseq is 32-byte aligned; the two fields lead it
		}
		if i >= at+8 || at+8 > len(a) {
			return false
		}
	}
	cpus := uint32(runtime.NumCPU())
	for _, m := range [][]byte{a, b} {
		start, id := binary.LittleEndian.Uint32(m[at:]), binary.LittleEndian.Uint32(m[at+4:])
		if start != id || id >= cpus {
			return false
		}
	}
	return true
}

// firstDiff describes where a and b first differ.
func firstDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			hi := min(i+32, len(a), len(b))
			return fmt.Sprintf("at %#x: %x -> %x", i, a[i:hi], b[i:hi])
		}
	}
	return fmt.Sprintf("length %d -> %d", len(a), len(b))
}

// folderState lists dir's files with their sizes, modes and content hashes.
func folderState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(&b, "%s %v %d", rel, info.Mode(), info.Size())
		if info.Mode().IsRegular() {
			data, _ := os.ReadFile(path)
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteByte('\n')
		return nil
	})
	return b.String()
}

const hold = `\openin15=./hold.tex \closein15 `

// report prints what a child sees of the state other children may try to
// change.
const report = `\immediate\write16{REPORT fd=\the\fontdimen2\font\space sec=\the\csname c@section\endcsname\space cat=\the\catcode` + "`" + `\Q\space zz=\ifdefined\outprintzz y\else n\fi\space nf=\ifdefined\outprintnewfont y\else n\fi\space secret=\ifdefined\outprintsecret y\else n\fi\space font=\fontname\font\space time=\the\time}\message{}`

// TestZygoteIsolation: nothing a child does reaches the zygote or another
// child: not a macro, font parameter, count, catcode, font or file, and
// not a byte of memory.
func TestZygoteIsolation(t *testing.T) {
	p, z := newZygotePool(t, PoolConfig{})
	zdir := z.dir
	folder0 := folderState(t, zdir)
	// The first fork binds the shim's calls (the dynamic linker writes
	// its tables once); the zygote's memory is compared from then on.
	forkTest(t, p, z, "first", "", 30).finish(t)
	mem0 := memoryCopy(t, z.p.pid)

	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", z.p.pid)); err != nil || !strings.Contains(string(b), "\nThreads:\t1\n") {
		t.Errorf("zygote status (err %v) does not say one thread:\n%s", err, b)
	}

	secret := "S3cr3t" + newNonce() + newNonce()
	a := forkTest(t, p, z, `\def\outprintsecret{`+secret+`}\immediate\write16{A-has-it}\message{}`+hold+"\n"+report, "", 30)
	a.waitLine(t, "A-has-it")
	b := forkTest(t, p, z, report+hold, "", 30)
	b.waitLine(t, "REPORT")

	if !memoryHas(t, a.p.pid, secret) {
		t.Fatalf("the memory scan finds the secret in A's memory: it cannot prove anything")
	}
	if memoryHas(t, b.p.pid, secret) {
		t.Errorf("B's memory holds A's secret")
	}
	if memoryHas(t, z.p.pid, secret) {
		t.Errorf("the zygote's memory holds A's secret")
	}
	if got := b.line("REPORT"); !strings.Contains(got, "secret=n") {
		t.Errorf("B sees A's macro: %s", got)
	}

	// Only the expected fds: stdin /dev/null, the output pipe, the
	// driver (here /dev/null), and regular files of its own folder or
	// read-only inputs; nothing of the zygote's but its main.tex.
	fdDir := fmt.Sprintf("/proc/%d/fd", b.p.pid)
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		target, _ := os.Readlink(filepath.Join(fdDir, e.Name()))
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", b.p.pid, fd))
		flags := ""
		for _, l := range strings.Split(string(info), "\n") {
			if strings.HasPrefix(l, "flags:") {
				flags = strings.TrimSpace(l[6:])
			}
		}
		fl, _ := strconv.ParseInt(flags, 8, 64)
		ok := false
		switch {
		case fd == 0 || fd == 3:
			ok = target == os.DevNull
		case fd == 1 || fd == 2:
			ok = strings.HasPrefix(target, "pipe:")
		case strings.HasPrefix(target, b.dir+"/"):
			ok = true
		case target == filepath.Join(zdir, "main.tex"):
			ok = fl&unix.O_ACCMODE == unix.O_RDONLY
		case strings.HasPrefix(target, "/") && !strings.HasPrefix(target, zdir):
			ok = fl&unix.O_ACCMODE == unix.O_RDONLY
		}
		if !ok {
			t.Errorf("child fd %d -> %s (flags %s) is not expected", fd, target, flags)
		}
	}

	// openin_any=p holds in a child: no reading A's folder.
	e := forkTest(t, p, z, `\openin14=../`+filepath.Base(a.dir)+`/body.tex \ifeof14 \immediate\write16{E-refused-rel}\fi
\openin13=`+a.dir+`/body.tex \ifeof13 \immediate\write16{E-refused-abs}\fi`, "", 30)
	e.finish(t)
	if e.line("E-refused-rel") == "" || e.line("E-refused-abs") == "" {
		t.Errorf("a child read another child's folder:\n%s", e.p.output())
	}

	// R reports the state before C; C changes it; D, forked after C
	// ended, must report what R did.
	r := forkTest(t, p, z, report, "", 30)
	r.finish(t)
	c := forkTest(t, p, z, `\global\fontdimen2\font=7.77pt
\global\csname c@section\endcsname=41
\global\catcode`+"`"+`\Q=12
\gdef\outprintzz{changed}
\global\font\outprintnewfont="Noto Sans" at 9pt \setbox0\hbox{\outprintnewfont x}
\immediate\openout5=c-wrote.tex \immediate\write5{c}\immediate\closeout5
`+report, "", 30)
	c.finish(t)
	d := forkTest(t, p, z, report, "", 30)
	d.finish(t)
	before, changed, after := r.line("REPORT"), c.line("REPORT"), d.line("REPORT")
	strip := func(s string) string { return s[:strings.Index(s, " time=")] }
	if before == "" || changed == "" || after == "" {
		t.Fatalf("missing reports: R %q, C %q, D %q", before, changed, after)
	}
	for _, want := range []string{"fd=7.77pt", "sec=41", "cat=12", "zz=y", "nf=y"} {
		if !strings.Contains(changed, want) {
			t.Errorf("C's report %q lacks %q: its changes did not happen", changed, want)
		}
	}
	if strip(after) != strip(before) {
		t.Errorf("D sees C's changes:\nbefore C: %s\nafter C:  %s", before, after)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "c-wrote.tex")); err != nil {
		t.Errorf("C's file is not in C's folder: %v", err)
	}
	for _, dir := range []string{d.dir, zdir} {
		if _, err := os.Stat(filepath.Join(dir, "c-wrote.tex")); err == nil {
			t.Errorf("C's file is in %s", dir)
		}
	}

	a.release(t)
	a.finish(t)
	b.release(t)
	b.finish(t)
	if got := folderState(t, zdir); got != folder0 {
		t.Errorf("the zygote's folder changed:\nbefore:\n%s\nafter:\n%s", folder0, got)
	}
	mem1 := memoryCopy(t, z.p.pid)
	for k, v := range mem0 {
		if !bytes.Equal(mem1[k], v) && !onlyRseq(v, mem1[k]) {
			t.Errorf("the zygote's memory changed in mapping %s: %s", k, firstDiff(v, mem1[k]))
		}
	}
	if len(mem0) != len(mem1) {
		t.Errorf("the zygote has %d writable mappings, had %d", len(mem1), len(mem0))
	}
}

// TestZygoteMatchesCold: zygote children typeset one- and two-run
// documents as a cold run does: text, pages, bookmarks.
func TestZygoteMatchesCold(t *testing.T) {
	testenv.Require(t, "qpdf")
	p, _ := newZygotePool(t, PoolConfig{})
	matchesCold(t, p, true)
}

// TestZygoteHotPages: the probe, typesetting outprint's own document,
// records the pages a child writes; a child waiting for its document has
// already made them its own (so the document does not fault on them), and
// a user's document never changes the record.
func TestZygoteHotPages(t *testing.T) {
	p, z := newZygotePool(t, PoolConfig{})
	for _, name := range []string{"hot-tex", "hot-driver"} {
		b, err := os.ReadFile(filepath.Join(z.dir, name))
		if err != nil || len(b) == 0 || len(b)%16 != 0 {
			t.Fatalf("%s: %d bytes, %v; want a list of ranges recorded by the probe", name, len(b), err)
		}
	}
	before, _ := os.ReadFile(filepath.Join(z.dir, "hot-tex"))
	var pages uint64
	for i := 0; i < len(before); i += 16 {
		pages += binary.NativeEndian.Uint64(before[i+8:]) / 4096
	}
	if pages < 256 {
		t.Errorf("hot-tex holds %d pages, want the probe's writes (some hundreds at least)", pages)
	}

	waitFor(t, "an idle child of the zygote", func() bool { return len(idleChildrenOf(p, z)) > 0 })
	pid := idleChildrenOf(p, z)[0]
	// Pages the probe allocated after its fork are not mapped in a
	// child that has not allocated them yet: only mapped ones count.
	mapped := mappedPages(t, pid, before)
	if mapped < pages/2 {
		t.Errorf("an idle child maps %d of the %d hot pages, want at least half", mapped, pages)
	}
	// A child is idle (in the pool) once it detached from its zygote, and
	// makes the hot pages its own after that, before it waits for a
	// document: under load the pages are read while it still copies them.
	// So wait for them, as a document would.
	min := mapped * 4 * 9 / 10
	var dirty uint64
	defer func() {
		if t.Failed() {
			t.Logf("the idle child's last private dirty: %d kB, want at least %d kB (90%% of the %d of %d hot pages it maps)", dirty, min, mapped, pages)
		}
	}()
	testenv.EventuallyWithin(t, 10*time.Second, "an idle child's private dirty memory to reach 90% of the hot pages it maps", func() bool {
		dirty = privateDirtyKB(t, pid)
		return dirty >= min
	})
	t.Logf("an idle child has %d kB private dirty, the %d of %d hot pages it maps are %d kB", dirty, mapped, pages, mapped*4)

	if _, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: strings.Repeat("A user's document. ", 200)}); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(z.dir, "hot-tex")); !bytes.Equal(after, before) {
		t.Errorf("a user's render changed the hot pages")
	}
}

// mappedPages counts the pages of the hot ranges (16 bytes each: start,
// length) that lie in pid's writable private mappings.
func mappedPages(t *testing.T, pid int, ranges []byte) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ a, b uint64 }
	var maps []span
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || len(f[1]) < 4 || f[1][1] != 'w' || f[1][3] != 'p' {
			continue
		}
		var a, e uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &a, &e); err == nil {
			maps = append(maps, span{a, e})
		}
	}
	var n uint64
	for i := 0; i+16 <= len(ranges); i += 16 {
		start := binary.NativeEndian.Uint64(ranges[i:])
		for at := start; at < start+binary.NativeEndian.Uint64(ranges[i+8:]); at += 4096 {
			for _, m := range maps {
				if m.a <= at && at < m.b {
					n++
					break
				}
			}
		}
	}
	return n
}

// privateDirtyKB is Private_Dirty of pid from /proc/PID/smaps_rollup.
func privateDirtyKB(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Private_Dirty:" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no Private_Dirty in smaps_rollup of %d", pid)
	return 0
}

// TestZygoteChildren: killing a child's group spares its siblings and the
// zygote; an endless loop dies of its CPU limit; \time and the date come
// from the server's go.tex, not from the zygote's start.
func TestZygoteChildren(t *testing.T) {
	p, z := newZygotePool(t, PoolConfig{})
	a := forkTest(t, p, z, `\immediate\write16{A-up}\message{}`+hold, "", 30)
	b := forkTest(t, p, z, `\immediate\write16{B-up}\message{}`+hold+`\immediate\write16{B-done}`, "", 30)
	a.waitLine(t, "A-up")
	b.waitLine(t, "B-up")
	a.p.killGroup()
	st := a.p.reap()
	if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("A ended with %v, want killed", st)
	}
	if !running(b.p.pid) || !running(z.p.pid) {
		t.Fatalf("killing A's group killed B (%v) or the zygote (%v)", running(b.p.pid), running(z.p.pid))
	}
	b.release(t)
	if st := b.finish(t); !st.Success() || b.line("B-done") == "" {
		t.Errorf("B after A was killed: %v\n%s", st, b.p.output())
	}

	loop := forkTest(t, p, z, `\loop\iftrue\repeat`, "", 1)
	st, cause := loop.p.wait(context.Background(), loop.dir, 1<<30, nil, nil)
	if cause != nil {
		t.Fatal(cause)
	}
	if err := classify(nil, st, logInfo{}, loop.p.output(), loop.dir); !errors.Is(err, ErrTimeout) {
		t.Errorf("endless loop ended with %v (%v), want ErrTimeout from its CPU limit", st, err)
	}
	if cpu := loop.p.cpu(); cpu < 500*time.Millisecond || cpu > 5*time.Second {
		t.Errorf("endless loop used %v of CPU, want about its 1 s limit", cpu)
	}

	nonce := newNonce()
	then := time.Date(2031, time.May, 17, 13, 37, 0, 0, time.UTC)
	clock := forkTest(t, p, z, `\immediate\write16{CLOCK \the\year-\the\month-\the\day\space\the\time}`, childGo(then, nonce, 500), 30)
	clock.finish(t)
	if got, want := clock.line("CLOCK"), "CLOCK 2031-5-17 817"; got != want {
		t.Errorf("child's clock = %q, want %q (from its go.tex)", got, want)
	}
	if !running(z.p.pid) {
		t.Errorf("the zygote died")
	}
}

// TestZygotePoolRenders: renders through the pool are forked, with \time
// fresh, and a zygote retires after Forks children.
func TestZygotePoolRenders(t *testing.T) {
	p, z := newZygotePool(t, PoolConfig{Zygote: ZygoteConfig{Forks: 3}})
	waitFor(t, "a slot", func() bool { return p.Stats().Warm > 0 })
	res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: `CLOCK \the\year-\the\month-\the\day-\the\time`})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	now := time.Now()
	if res.Forked != 1 {
		t.Errorf("Result.Forked = %d, want 1: the render was not a zygote's child", res.Forked)
	}
	got := strings.TrimSpace(pdfText(t, res.PDF))
	var ok bool
	for _, at := range []time.Time{now, now.Add(-time.Minute)} {
		if strings.HasPrefix(got, fmt.Sprintf("CLOCK %d-%d-%d-%d", at.Year(), at.Month(), at.Day(), at.Hour()*60+at.Minute())) {
			ok = true
		}
	}
	if !ok {
		t.Errorf("the render's clock %q is not now (%v)", got, now)
	}
	if res.WarmCPU >= res.CPU || res.CPU <= 0 {
		t.Errorf("CPU %v, WarmCPU %v: want 0 <= WarmCPU < CPU", res.CPU, res.WarmCPU)
	}

	// Retirement after Forks children (3 here).
	waitFor(t, "a zygote", func() bool { return p.Stats().Zygotes > 0 })
	z = servingZygote(p)
	for i := 0; i < 10 && running(z.p.pid); i++ {
		if _, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "x"}); err != nil {
			t.Fatalf("Run = %v", err)
		}
		z.mu.Lock()
		n := z.forks
		z.mu.Unlock()
		if n >= 3 {
			waitFor(t, "the zygote to retire after its forks", func() bool { return !running(z.p.pid) })
		}
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if running(z.p.pid) || z.forks != 3 {
		t.Errorf("zygote running %v after %d forks, want retired after 3", running(z.p.pid), z.forks)
	}
}

// TestZygoteCrashRetires: a child killed by SIGSEGV retires its zygote at
// once, and the retirement is counted exactly once by the time the render
// has failed (the counter behind
// outprint_tex_pool_zygotes_retired_total), however loaded the machine.
func TestZygoteCrashRetires(t *testing.T) {
	p, _ := newZygotePool(t, PoolConfig{})
	waitFor(t, "a slot", func() bool { return p.Stats().Warm > 0 })
	z := servingZygote(p)
	errs := startHungRender(t, context.Background(), p.Run, 60*time.Second)
	pid := hungChild(t, p)
	// The crashed child's idle siblings: forked from the same zygote,
	// waiting for documents. They share its layout too.
	waitFor(t, "an idle sibling", func() bool { return len(idleChildrenOf(p, z)) > 0 })
	siblings := idleChildrenOf(p, z)
	retired := p.Stats().ZygotesRetired
	_ = unix.Kill(pid, unix.SIGSEGV)
	if err := <-errs; err == nil {
		t.Errorf("a render whose TeX died of SIGSEGV succeeded")
	}
	if got := p.Stats().ZygotesRetired; got != retired+1 {
		t.Errorf("ZygotesRetired = %d when the crashed render returned, want %d", got, retired+1)
	}
	p.mu.Lock()
	for _, r := range p.profileLocked(testPreamble).zygotes.ready {
		if r == z {
			t.Errorf("the crashed child's zygote is still ready to fork")
		}
	}
	p.mu.Unlock()
	waitFor(t, "the zygote to end", func() bool { return !running(z.p.pid) })
	for _, sib := range siblings {
		waitFor(t, "the crashed child's idle siblings to end", func() bool { return !running(sib) })
	}
	waitFor(t, "a new zygote", func() bool { return p.Stats().Zygotes > 0 })
	if got := p.Stats().ZygotesRetired; got != retired+1 {
		t.Errorf("ZygotesRetired = %d after the zygote ended, want %d (counted once)", got, retired+1)
	}
}

// idleChildrenOf returns the pids of z's children waiting in the pool for
// a document.
func idleChildrenOf(p *Pool, z *zygote) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for _, wp := range z.prof.warm {
		if wp.zyg == z {
			pids = append(pids, wp.p.pid)
		}
	}
	return pids
}

// hungChild returns the pid of the zygote's child that typesets
// startHungRender's document.
func hungChild(t *testing.T, p *Pool) int {
	t.Helper()
	var pid int
	waitFor(t, "the hung child", func() bool {
		for _, proc := range procsUnder(p.cfg.Runner.TempDir) {
			if !strings.HasSuffix(proc, " xelatex") {
				continue
			}
			n := pidsOf([]string{proc})[0]
			if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", n)); strings.Contains(cwd, "outprint-warm-") {
				if _, err := os.Stat(filepath.Join(cwd, "body.tex")); err == nil {
					pid = n
					return true
				}
			}
		}
		return false
	})
	return pid
}

// TestZygoteRetiredWhileChildStarts: with Forks 1 every fork retires its
// zygote at once, so the zygote's folder is removed and its process group
// killed while its child is starting. The child must not depend on either
// once the zygote answered the fork: every render succeeds with all of
// its text (the chaos test saw "I can't find file main.aux" once: a child
// had copied the zygote's main.aux after the folder was gone), and each
// retirement counts once.
func TestZygoteRetiredWhileChildStarts(t *testing.T) {
	p, _ := newZygotePool(t, PoolConfig{Zygote: ZygoteConfig{Forks: 1}})
	const renders = 8
	forked, retired := p.Stats().Forked, p.Stats().ZygotesRetired
	// Until a zygote is ready after a retirement, renders get warm
	// processes of their own, and the next one may too: render until
	// enough were forked.
	children := 0
	for i := 0; children < renders; i++ {
		if i == 5*renders {
			t.Fatalf("%d renders, %d of them forked; want %d forked", i, children, renders)
		}
		waitFor(t, "a zygote", func() bool { return p.Stats().Zygotes > 0 })
		res, err := p.Run(context.Background(), Job{Preamble: testPreamble,
			Body: fmt.Sprintf(`Render %d.\label{here}\newpage Second page, see page \pageref{here}.`, i)})
		if err != nil {
			t.Fatalf("render %d: Run = %v", i, err)
		}
		if got := pdfText(t, res.PDF); !strings.Contains(got, fmt.Sprintf("Render %d.", i)) || !strings.Contains(got, "Second page, see page 1") {
			t.Errorf("render %d: text %q, want both pages", i, got)
		}
		children += res.Forked
	}
	// Each retirement counts once: the count never passes the forks. It
	// may stay below them: two warm slots that read the same ready zygote
	// at once both fork from it before either retires it (a zygote then
	// gives Forks+1 children, which costs nothing), and that zygote
	// retires once (CI on a loaded machine waited 10 s for equality in vain).
	// A slot being forked for meanwhile counts its fork a moment before
	// it retires the zygote, so the retirements are waited for.
	var s PoolStats
	testenv.EventuallyWithin(t, 10*time.Second, "zygotes retired after the forks (Forks 1)", func() bool {
		s = p.Stats()
		return s.ZygotesRetired-retired >= renders/2
	})
	if got, forks := s.ZygotesRetired-retired, s.Forked-forked; got > forks || got < renders/2 {
		t.Errorf("ZygotesRetired grew by %d over %d forks with Forks 1, want between %d and %d", got, forks, renders/2, forks)
	}
}

// TestZygoteDeathFallsBack: when its zygotes die, a running child
// finishes its document, and renders go on with warm processes of their
// own until a new zygote is ready.
func TestZygoteDeathFallsBack(t *testing.T) {
	p, _ := newZygotePool(t, PoolConfig{})
	// A profile renders use keeps a spare zygote (one kept warm only by
	// Min does not).
	if _, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "in use"}); err != nil {
		t.Fatalf("Run = %v", err)
	}
	waitFor(t, "a spare zygote and a slot", func() bool { s := p.Stats(); return s.Zygotes == 2 && s.Warm > 0 })
	shipped := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	var res *Result
	go func() {
		var err error
		res, err = p.Run(context.Background(), Job{
			Preamble: testPreamble,
			Body:     "page one\\newpage\n\\count1=0 \\loop\\advance\\count1 1 \\ifnum\\count1<3000000 \\repeat page two\n",
			Progress: func(int) { once.Do(func() { close(shipped) }) },
		})
		done <- err
	}()
	<-shipped
	p.mu.Lock()
	zs := append([]*zygote(nil), p.profileLocked(testPreamble).zygotes.ready...)
	p.mu.Unlock()
	for _, z := range zs {
		_ = unix.Kill(z.p.pid, unix.SIGKILL)
	}
	if err := <-done; err != nil {
		t.Fatalf("the running child failed when its zygote died: %v", err)
	}
	if pdfPages(t, res.PDF) != 2 || !strings.Contains(pdfText(t, res.PDF), "page two") {
		t.Errorf("the running child's PDF is incomplete: %q", pdfText(t, res.PDF))
	}
	waitFor(t, "the zygotes' retirement", func() bool { return p.Stats().ZygotesRetired >= len(zs) })
	for i := 0; i < 2; i++ {
		res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "after"})
		if err != nil {
			t.Fatalf("Run after the zygotes died = %v", err)
		}
		if !strings.Contains(pdfText(t, res.PDF), "after") {
			t.Errorf("text after the zygotes died: %q", pdfText(t, res.PDF))
		}
	}
}

// TestZygoteNoCompiler: without a C compiler the pool says why in its
// figures and renders with warm processes of their own.
func TestZygoteNoCompiler(t *testing.T) {
	testenv.Require(t, "xelatex")
	prog, _ := exec.LookPath("xelatex")
	t.Setenv("PATH", t.TempDir())
	p, err := NewPool(PoolConfig{Min: 1, Max: 2, Preambles: []string{testPreamble}, Runner: RunnerConfig{Program: prog, TempDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()
	res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "fallback"})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	s := p.Stats()
	if !strings.Contains(s.ZygoteOff, "C compiler") || s.Forked != 0 || s.Zygotes != 0 {
		t.Errorf("Stats = %+v, want ZygoteOff naming the C compiler and nothing forked", s)
	}
	if !bytes.HasPrefix(res.PDF, []byte("%PDF-")) {
		t.Errorf("no PDF")
	}
}

// TestZygoteWrappedProgram: a program that is a shell script running
// XeLaTeX (as Nix and some TeX installations wrap their binaries) never
// reaches the zygote's gate, since the shim loads into the shell and
// unsets itself before XeLaTeX starts. The pool sees the zygote's end as
// it happens, not at the warm-up timeout (an hour here; the service's
// first renders once waited a minute for it), and renders with warm
// processes of their own.
func TestZygoteWrappedProgram(t *testing.T) {
	requireGCC(t)
	real, err := exec.LookPath("xelatex")
	if err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(t.TempDir(), "xelatex")
	if err := os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\nexec %q \"$@\"\n", real)), 0o755); err != nil {
		t.Fatal(err)
	}
	p := newTestPool(t, PoolConfig{Min: 1, Preambles: []string{testPreamble}, WarmupTimeout: time.Hour,
		Runner: RunnerConfig{Program: wrapper}})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
	defer cancel()
	res, err := p.Run(ctx, Job{Preamble: testPreamble, Body: "wrapped"})
	if err != nil {
		t.Fatalf("Run = %v, want a PDF from a warm process of its own (stats %+v)", err, p.Stats())
	}
	if !strings.Contains(pdfText(t, res.PDF), "wrapped") {
		t.Errorf("text = %q, want wrapped", pdfText(t, res.PDF))
	}
	if s := p.Stats(); s.ZygoteFailures == 0 || s.Forked != 0 {
		t.Errorf("Stats = %+v, want a failed zygote and nothing forked", s)
	}
}

// TestZygoteServerDeath: when the server dies, its zygotes, their children
// and the children's xdvipdfmx die too. The server is this test binary
// run again as a helper (TestZygoteHelperServer).
func TestZygoteServerDeath(t *testing.T) {
	requireGCC(t)
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestZygoteHelperServer$", "-test.v")
	cmd.Env = append(os.Environ(), "OUTPRINT_ZYGOTE_HELPER="+tmp)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "PIDS ") {
			for _, f := range strings.Fields(l)[1:] {
				n, _ := strconv.Atoi(f)
				pids = append(pids, n)
			}
			break
		}
	}
	if len(pids) < 3 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper reported pids %v, want a zygote, a child and its xdvipdfmx at least", pids)
	}
	_ = cmd.Process.Kill()
	go func() { _, _ = io.Copy(io.Discard, out) }()
	_ = cmd.Wait()
	waitFor(t, "every TeX process to die with the server", func() bool {
		for _, pid := range pids {
			if running(pid) {
				return false
			}
		}
		return true
	})
}

// TestZygoteHelperServer is the server TestZygoteServerDeath kills: it
// starts a pool, a render that never ends, prints the pids of every TeX
// process and waits to be killed. Outside that test it does nothing.
func TestZygoteHelperServer(t *testing.T) {
	tmp := os.Getenv("OUTPRINT_ZYGOTE_HELPER")
	if tmp == "" {
		return
	}
	p, err := NewPool(PoolConfig{Min: 1, Max: 2, Preambles: []string{testPreamble}, Runner: RunnerConfig{TempDir: tmp}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a zygote and a slot", func() bool { s := p.Stats(); return s.Zygotes > 0 && s.Warm > 0 })
	startHungRender(t, context.Background(), p.Run, 60*time.Second)
	var pids []string
	for _, proc := range procsUnder(tmp) {
		pids = append(pids, strings.Fields(proc)[0])
	}
	fmt.Printf("PIDS %s\n", strings.Join(pids, " "))
	time.Sleep(10 * time.Minute)
}

// TestProcessesNice: every process of a render runs at childproc.Nice, so
// the server's own goroutines win the CPU while TeX keeps every core busy
// (/proc/PID/stat's nice field): a warm process warmed by itself and its
// xdvipdfmx, a zygote, a zygote's child typesetting, its driver's shell
// and xdvipdfmx.
func TestProcessesNice(t *testing.T) {
	checkNice := func(t *testing.T, root string, want ...string) {
		t.Helper()
		seen := map[string]bool{}
		for _, proc := range procsUnder(root) {
			pid := pidsOf([]string{proc})[0]
			n, err := childproc.NiceOf(pid)
			if err != nil {
				continue // gone meanwhile
			}
			if n != childproc.Nice {
				t.Errorf("process %s runs at nice %d, want %d", proc, n, childproc.Nice)
			}
			cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
			kind := "warm"
			if strings.Contains(cwd, "outprint-zygote-") {
				kind = "zygote"
			}
			seen[kind+" "+strings.Fields(proc)[1]] = true
		}
		for _, w := range want {
			if !seen[w] {
				t.Errorf("no %s process found (saw %v)", w, seen)
			}
		}
	}
	t.Run("warm", func(t *testing.T) {
		p := newTestPool(t, PoolConfig{Min: 1, Preambles: []string{testPreamble}, Zygote: ZygoteConfig{Off: true}})
		waitFor(t, "a warm process", func() bool { return p.Stats().Warm > 0 })
		checkNice(t, p.cfg.Runner.TempDir, "warm xelatex", "warm xdvipdfmx")
	})
	t.Run("zygote", func(t *testing.T) {
		p, _ := newZygotePool(t, PoolConfig{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errs := startHungRender(t, ctx, p.Run, 60*time.Second)
		hungChild(t, p)
		checkNice(t, p.cfg.Runner.TempDir, "zygote xelatex", "warm xelatex", "warm xdvipdfmx")
		cancel()
		if err := <-errs; !errors.Is(err, ErrCanceled) {
			t.Errorf("hung render after cancel: Run = %v, want ErrCanceled", err)
		}
	})
}
