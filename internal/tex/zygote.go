package tex

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/limits"
)

// A zygote is a XeTeX process that loaded a profile's preamble and fonts,
// passed \begin{document} and then, instead of typesetting a document,
// forks a child for each one: the child starts where a warm process waits
// for its document, without paying the warm-up (some 140 ms of CPU, most of
// it filling XeTeX's 160 MB of arrays). Its driver zygote does the same
// for xdvipdfmx, whose children convert the TeX children's main.xdv. The
// fork happens inside XeTeX (and xdvipdfmx),
// through a small C library preloaded into it (zygote/shim.c, built with
// the machine's C compiler when the pool first needs it); see the
// "zygote" section of DEVELOPERS.md.
//
// A child is the server's child, not the zygote's (clone with
// CLONE_PARENT): the pool waits for it, reads its rusage and sets its
// rlimits as for a process it started itself, and it runs in its own
// process group and scratch folder. Children share the zygote's memory
// copy-on-write only; what one child does is never seen by the zygote or
// by another child (TestZygoteIsolation).

// shimSource is the C source of the preloaded library.
//
//go:embed zygote/shim.c
var shimSource []byte

// zygoteGate is the file whose opening the shim intercepts: the zygote's
// main.tex inputs it after the warm-up, and a child inputs its own, which
// sets the clock, the page limit and the nonce of its document.
const zygoteGate = "./go.tex"

// forkProbe is the request flag of the probe (shim.c's FORK_PROBE).
const forkProbe = 1

// zygoteCtlFD is the zygote's control socket's fd number; fd 3 is the
// output driver's pipe in a child (a placeholder in the zygote).
const zygoteCtlFD = 4

// shimName is the file name of the shim built from shimSource, named by
// the source's hash as scripts/shim.sh names it, so a shim of another
// source is never loaded.
func shimName() string {
	sum := sha256.Sum256(shimSource)
	return "zygote-" + hex.EncodeToString(sum[:8]) + ".so"
}

// shimDirs are the folders a prebuilt shim (scripts/shim.sh) is looked for
// in: beside the running binary (bin/ of `make build`) and ../lib/outprint
// from there (the image's /usr/local/lib/outprint).
func shimDirs() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	dir := filepath.Dir(exe)
	return []string{dir, filepath.Join(dir, "..", "lib", "outprint")}
}

// prebuiltShim returns the path of the file name in the first of dirs that
// has it as a regular file, "" when none does.
func prebuiltShim(name string, dirs []string) string {
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// buildShim returns the path of the shim: the prebuilt one (shimDirs), or
// else one compiled into dir unless it is there already. Compiling is the
// development fallback and needs a C compiler (gcc or cc); without one the
// pool keeps warm processes of its own.
func buildShim(dir string) (string, error) {
	if p := prebuiltShim(shimName(), shimDirs()); p != "" {
		return p, nil
	}
	name := strings.TrimSuffix(shimName(), ".so")
	out := filepath.Join(dir, name+".so")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	cc := ""
	for _, c := range []string{"gcc", "cc"} {
		if p, err := exec.LookPath(c); err == nil {
			cc = p
			break
		}
	}
	if cc == "" {
		return "", errors.New("no C compiler (gcc or cc) to build the zygote shim")
	}
	src := filepath.Join(dir, name+".c")
	if err := os.WriteFile(src, shimSource, 0o600); err != nil {
		return "", fmt.Errorf("zygote shim: %w", err)
	}
	tmp := out + ".tmp"
	cmd := exec.Command(cc, "-O2", "-shared", "-fPIC", "-Wl,-z,now", "-o", tmp, src, "-ldl")
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp) // err is the error; tmp is what cc may have left
		return "", fmt.Errorf("build zygote shim: %v: %s", err, lastLines(string(b), 5))
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("zygote shim: %w", err)
	}
	return out, nil
}

// zygote is one running zygote process.
type zygote struct {
	prof  *profile
	dir   string
	nonce string
	p     *proc
	ctl   *net.UnixConn // our end of the SOCK_SEQPACKET control socket
	born  time.Time
	// retire is closed (once, by retireOnce) when the zygote must go:
	// too many forks, a child crashed, the pool closes.
	retire     chan struct{}
	retireOnce sync.Once
	// retired is set, under Pool.mu, by the one retireZygote call that
	// takes the zygote out of service and counts it.
	retired bool

	mu    sync.Mutex // serializes fork requests
	forks int        // under mu

	// drv is the zygote's driver zygote: an xdvipdfmx that read its
	// configuration, font maps and file databases (some 40 ms of CPU
	// per document otherwise) and forks a driver for each child, which
	// converts the child's main.xdv when the child is done. The pair
	// starts, serves and retires together; owner is set in drv.
	drv, owner *zygote
}

func (z *zygote) doRetire() {
	if z.owner != nil {
		z.owner.doRetire()
		return
	}
	z.retireOnce.Do(func() { close(z.retire) })
}

// zygoteDocument is main.tex of a zygote: warmDocument's preamble, harness
// and warm-up, then the gate. The harness's messages name the nonce through
// \outprint@nonce, which each child's go.tex sets to a nonce of its own, so
// no document learns another's. go.tex also sets \time, \day, \month and
// \year (frozen at the zygote's start otherwise), the random seed and the
// page limit.
func zygoteDocument(preamble, nonce string, withFormat bool) string {
	var b strings.Builder
	if head, tail, ok := splitAtDump(preamble); ok && withFormat {
		b.WriteString(head)
		b.WriteString(dumpMarker + "\n")
		b.WriteString(lmrRestore())
		b.WriteString(tail)
	} else {
		b.WriteString(preamble)
	}
	if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(`\makeatletter\gdef\outprint@nonce{` + nonce + `}\makeatother` + "\n")
	b.WriteString(harness(`\outprint@nonce\space`, limits.DefaultMaxPages))
	b.WriteString(`\makeatletter
\let\outprint@preamblecmds\@preamblecmds
\begingroup\def\do#1{\expandafter\global\expandafter\let\csname outprint@saved@\string#1\endcsname#1}\outprint@preamblecmds\endgroup
\makeatother
\begin{document}
\makeatletter
\begingroup\setbox\z@\hbox{\ifdefined\outprintwarmup\outprintwarmup\else ` + defaultWarmup + `\fi}\endgroup
\immediate\write16{` + marker(nonce) + `ready}\message{}%
\@@input ` + zygoteGate + `
\def\do#1{\expandafter\let\expandafter#1\csname outprint@saved@\string#1\endcsname}\outprint@preamblecmds
\let\AtBeginDocument\@firstofone
\@input{./prev.aux}%
\def\do#1{\let#1\@notprerr}\outprint@preamblecmds
\let\do\noexpand
\immediate\write16{OUTPRINT-\outprint@nonce\space start}\message{}%
\makeatother
\input{./body.tex}
\OutprintEnd
\end{document}
`)
	return b.String()
}

// childGo is a child's go.tex: the clock of now, a random seed, the page
// limit and the child's nonce.
func childGo(now time.Time, nonce string, maxPages int) string {
	return fmt.Sprintf(`\global\time=%d \global\day=%d \global\month=%d \global\year=%d
\ifdefined\setrandomseed\setrandomseed%d \fi
\global\outprint@maxpages=%d
\xdef\outprint@nonce{%s}%%
`, now.Hour()*60+now.Minute(), now.Day(), int(now.Month()), now.Year(),
		now.UnixNano()%(1<<31-1), maxPages, nonce)
}

// driverGate is the file whose opening the shim intercepts in a driver
// zygote: xdvipdfmx opens its input after its set-up, and a driver child
// opens its folder's main.xdv, which its TeX child wrote.
const driverGate = "main.xdv"

// startZygote starts a zygote for preamble in a folder of its own, and its
// driver zygote, and waits until both are at their gates (or the warm-up
// timeout, a process's death or stop).
func (p *Pool) startZygote(prof *profile, shim, fmtPath string, stop <-chan struct{}) (*zygote, error) {
	dir, err := os.MkdirTemp(p.cfg.Runner.TempDir, "outprint-zygote-")
	if err != nil {
		return nil, fmt.Errorf("zygote folder: %w", err)
	}
	z := &zygote{prof: prof, dir: dir, nonce: newNonce(), retire: make(chan struct{})}
	fail := func(err error) (*zygote, error) {
		z.close()
		return nil, err
	}
	if err := writeFile(dir, "main.tex", zygoteDocument(prof.preamble, z.nonce, fmtPath != "")); err != nil {
		return fail(err)
	}
	// kpathsea looks the gate up before the shim sees its fopen: it
	// must exist, and it is never read.
	if err := writeFile(dir, "go.tex", "\n"); err != nil {
		return fail(err)
	}
	// The zygote's own CPU limit covers its warm-up and its forks (the
	// clone calls are its CPU time); children get theirs in the request.
	timeout := cpuSeconds(p.cfg.WarmupTimeout + p.cfg.Runner.Timeout)
	// Its children write main.xdv, which their driver children convert:
	// XeLaTeX starts no driver of its own.
	z.p, z.ctl, err = p.startGated(dir, p.sb.program, p.sb.args(fmtPath, noPDF), zygoteGate, shim, timeout, stop)
	if err != nil {
		var gerr *gateError
		if errors.As(err, &gerr) {
			li, _ := readLog(dir, z.nonce)
			if cerr := classify(nil, gerr.state, li, gerr.output, dir); cerr != nil {
				err = cerr
			}
			err = fmt.Errorf("zygote warm-up: %w: %s", err, lastLines(gerr.output, 3))
		}
		return fail(err)
	}
	drv := &zygote{prof: prof, dir: dir, owner: z, retire: z.retire}
	drv.p, drv.ctl, err = p.startGated(dir, p.sb.xdvipdfmx, []string{"-q", "-E", "-o", "main.pdf", driverGate}, driverGate, shim, timeout, stop,
		"OUTPRINT_ZYGOTE_FONTS=1",
		// Font tables and page streams come from the heap, whose
		// huge pages a child gets in one fault each, rather than from
		// mappings of their own faulted page by page (a fifth fewer
		// page faults per driver child).
		"GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432")
	if err != nil {
		var gerr *gateError
		if errors.As(err, &gerr) {
			err = fmt.Errorf("driver zygote: %w: %s", gerr.err, lastLines(gerr.output, 3))
		}
		return fail(err)
	}
	z.drv = drv
	if err := p.probe(z, stop); err != nil {
		return fail(fmt.Errorf("zygote probe: %w", err))
	}
	z.born = time.Now()
	return z, nil
}

// probeDocument is the body the probe typesets: outprint's own, so what
// its children learn never comes from a user's document. It uses what
// most documents use (sections, the text fonts and their styles, lists,
// a table, math, a footnote, a link).
const probeDocument = `\section{Probe}
Outprint typesets this page once per zygote, in \textbf{bold}, \textit{italic},
\texttt{monospace} and \textsf{sans}, with $a^2 + b^2 = c^2$ and a note.\footnote{A note.}
\subsection{List}
\begin{itemize}\item One item of a list.\item Another, \emph{emphasised}.\end{itemize}
\begin{enumerate}\item First.\item Second.\end{enumerate}
\begin{tabular}{ll}\hline A & B\\ \hline c & d\\ \hline\end{tabular}
\par
The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.
The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.
The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.
`

// probe forks z's first children, the probe pair, and lets them typeset
// probeDocument and convert it. They record, at their exit, which pages
// of the zygotes they wrote (see "Hot pages" in shim.c); every later child
// copies those pages before it waits for its document. A probe whose
// document fails still records; only the zygotes' failure is an error.
func (p *Pool) probe(z *zygote, stop <-chan struct{}) error {
	dir, err := os.MkdirTemp(p.cfg.Runner.TempDir, "outprint-probe-")
	if err != nil {
		return fmt.Errorf("probe folder: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }() // scratch: a failure costs only disk
	nonce := newNonce()
	if err := writeFile(dir, "body.tex", bodyFile(probeDocument)); err != nil {
		return err
	}
	child, goW, err := p.forkPair(z, dir, nil, true)
	if err != nil {
		return err
	}
	if err := goChild(dir, nonce, goW, 10); err != nil {
		child.killGroup()
		child.reap()
		return fmt.Errorf("probe: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.WarmupTimeout)
	defer cancel()
	go func() { // ends with the probe: wait returns when ctx ends or the pair exits
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, cause := child.wait(ctx, dir, p.cfg.Runner.ScratchBytes, nil, nil)
	if cause != nil {
		return cause
	}
	return nil
}

// gateError: a gated process ended or failed before it reached its gate.
type gateError struct {
	err    error
	state  *os.ProcessState
	output string
}

func (e *gateError) Error() string { return e.err.Error() }

// startGated starts program with the shim preloaded and gate as its gate,
// in dir, and waits until it says it is at its gate: it is then ready to
// fork children through the returned control socket.
func (p *Pool) startGated(dir, program string, args []string, gate, shim string, cpu uint64, stop <-chan struct{}, env ...string) (*proc, *net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("control socket: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "zygote-ctl")
	theirs := os.NewFile(uintptr(fds[1]), "zygote-ctl-peer")
	// Our copies of the descriptors go once the process and the
	// net.Conn hold theirs; the errors of the Closes here and below (a
	// socket, /dev/null, a connection on a failed start) report nothing
	// about the zygote, so they are dropped. The deferred Closes are for
	// a failure before the start; after it they find the files closed.
	defer func() { _ = theirs.Close() }()
	c, err := net.FileConn(ours)
	_ = ours.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("control socket: %w", err)
	}
	ctl := c.(*net.UnixConn)
	placeholder, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		_ = ctl.Close()
		return nil, nil, err
	}
	defer func() { _ = placeholder.Close() }()
	pr, err := p.sb.startProgram(dir, program, args, cpu, nil, spawn{
		extra: []*os.File{placeholder, theirs},
		env: append([]string{
			"LD_PRELOAD=" + shim,
			fmt.Sprintf("OUTPRINT_ZYGOTE_FD=%d", zygoteCtlFD),
			"OUTPRINT_ZYGOTE_GATE=" + gate,
		}, env...),
	})
	// The process holds its own copies now. Ours of its end must go
	// before the wait below: while we hold it, a process that dies
	// before its gate leaves the socket open, and the read sees no end
	// of file until the warm-up timeout (a minute by default).
	_ = theirs.Close()
	_ = placeholder.Close()
	if err != nil {
		_ = ctl.Close()
		return nil, nil, err
	}
	// The process says "R" on the control socket when it is at its gate.
	ready := make(chan error, 1)
	go func() { // ends when the process answers, dies, or the deadline passes
		// Without its deadline the read could wait for ever on a
		// process stuck before its gate.
		if err := ctl.SetReadDeadline(time.Now().Add(p.cfg.WarmupTimeout)); err != nil {
			ready <- fmt.Errorf("control socket deadline: %w", err)
			return
		}
		var b [8]byte
		n, err := ctl.Read(b[:])
		_ = ctl.SetReadDeadline(time.Time{}) // every later read sets its own
		if err == nil && (n != 1 || b[0] != 'R') {
			err = fmt.Errorf("zygote said %q", b[:n])
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			pr.killGroup()
			st := pr.reap()
			_ = ctl.Close()
			return nil, nil, &gateError{err: err, state: st, output: pr.output()}
		}
	case <-stop:
		_ = ctl.Close()
		pr.killGroup()
		pr.reap()
		return nil, nil, ErrPoolClosed
	}
	return pr, ctl, nil
}

// close ends the zygote and its driver zygote: their sockets close (the
// shim then exits), their groups are killed and reaped, the folder
// removed. Their children run on. It ends what a failed start left too.
func (z *zygote) close() {
	for _, x := range []*zygote{z.drv, z} {
		if x == nil {
			continue
		}
		// The zygote is ending: a socket's Close reports nothing about
		// it, and the folder is scratch space (a failure costs disk).
		if x.ctl != nil {
			_ = x.ctl.Close()
		}
		if x.p != nil {
			x.p.killGroup()
			x.p.reap()
		}
	}
	_ = os.RemoveAll(z.dir)
}

// cpu is the CPU time of the zygote and its driver zygote so far (or in
// all, once reaped).
func (z *zygote) cpu() time.Duration {
	d := cpuTime(z.p.state) + cpuTime(z.drv.p.state)
	if z.p.state == nil {
		d = procCPU(z.p.pid) + procCPU(z.drv.p.pid)
	}
	return d
}

// errZygoteGone: the zygote died or retired before it could fork.
var errZygoteGone = errors.New("zygote gone")

// fork asks the zygote for a child in dir, with out as its stdout and
// stderr, driver as its fd 3 and goR as its go pipe, limited to cpuSeconds
// of CPU. The child has detached itself (process group, files, folder)
// when fork returns, and waits for a byte on the go pipe.
func (z *zygote) fork(dir string, out, driver, goR *os.File, cpuSeconds uint64, probe bool) (int, error) {
	d, err := os.Open(dir)
	if err != nil {
		return 0, fmt.Errorf("child folder: %w", err)
	}
	defer func() { _ = d.Close() }() // only passed on
	msg := make([]byte, 16, 16+len(dir)+1)
	binary.NativeEndian.PutUint64(msg, cpuSeconds)
	if probe {
		binary.NativeEndian.PutUint64(msg[8:], forkProbe)
	}
	msg = append(msg, dir...)
	msg = append(msg, 0)
	rights := unix.UnixRights(int(d.Fd()), int(out.Fd()), int(driver.Fd()), int(goR.Fd()))
	z.mu.Lock()
	defer z.mu.Unlock()
	select {
	case <-z.retire:
		return 0, errZygoteGone
	case <-z.p.exited:
		return 0, errZygoteGone
	default:
	}
	// The deadline is set before the request, so that a socket that
	// takes none fails before a child is forked; without it the read
	// could wait for ever on a stuck zygote.
	if err := z.ctl.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return 0, fmt.Errorf("%w: %v", errZygoteGone, err)
	}
	if _, _, err := z.ctl.WriteMsgUnix(msg, rights, nil); err != nil {
		return 0, fmt.Errorf("%w: %v", errZygoteGone, err)
	}
	var b [4]byte
	n, err := z.ctl.Read(b[:])
	_ = z.ctl.SetReadDeadline(time.Time{}) // every read sets its own
	if err != nil || n != 4 {
		// A zygote that does not answer is of no use: it retires.
		z.doRetire()
		return 0, fmt.Errorf("%w: no answer (%v)", errZygoteGone, err)
	}
	pid := int32(binary.NativeEndian.Uint32(b[:]))
	if pid <= 0 {
		return 0, fmt.Errorf("zygote fork: %w", syscall.Errno(-pid))
	}
	z.forks++
	return int(pid), nil
}

// spawn forks a child of z (or of a driver zygote) in dir with fd3 as its
// fd 3 and goR as its go pipe; the child starts on its document (a TeX
// child: its folder's go.tex; a driver child: main.xdv) once a byte arrives
// there. probe makes it the probe, which records its hot pages. It is
// watched like any started process: a waiter and a reader goroutine,
// rlimits by prlimit.
func (p *Pool) spawn(z *zygote, dir string, fd3, goR *os.File, cpuSeconds uint64, probe bool, onLine func(string)) (*proc, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("output pipe: %w", err)
	}
	pid, err := z.fork(dir, pw, fd3, goR, cpuSeconds, probe)
	// Our copy of the write end goes once the child holds its own; the
	// Closes of a pipe's ends report nothing about the child.
	_ = pw.Close()
	if err != nil {
		_ = pr.Close()
		return nil, err
	}
	// The child makes its group itself; doing it here too means the
	// group exists before anyone may kill it.
	_ = unix.Setpgid(pid, pid)
	osp, err := os.FindProcess(pid)
	if err != nil { // never on Linux
		_ = unix.Kill(pid, unix.SIGKILL) // err is the error
		_ = pr.Close()
		return nil, fmt.Errorf("zygote child: %w", err)
	}
	c := &proc{
		osp: osp, name: z.p.name, pid: pid, pgid: pid, // xelatex or xdvipdfmx
		exited: make(chan struct{}), readDone: make(chan struct{}), out: pr,
	}
	go c.waitExit() // owned by c, as in startProgram
	go c.read(onLine)
	if err := p.sb.limit(pid, cpuSeconds); err != nil && !errors.Is(err, unix.ESRCH) {
		c.killGroup()
		c.reap()
		return nil, fmt.Errorf("rlimits: %w", err)
	}
	return c, nil
}

// crashed reports whether a child died of a signal that may mean memory
// corruption or probing: its zygote, whose layout and stack canary every
// child shares, must not give it many tries.
func crashed(st *os.ProcessState) bool {
	if st == nil {
		return false
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return false
	}
	switch ws.Signal() {
	case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGILL, syscall.SIGABRT:
		return true
	}
	return false
}
