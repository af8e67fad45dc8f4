package diagram

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/limits"
)

// mermaidSetup is what drawing Mermaid needs: the browser binary and the
// bundle's text.
type mermaidSetup struct {
	chromium string
	script   string
}

// maxBundleBytes bounds the bundle read from MermaidDir (11.16.1's is
// 3.4 MiB).
const maxBundleBytes = 16 << 20

// loadMermaid finds Chromium and reads the Mermaid bundle, checked against
// its pinned SHA-256. Its error says what is missing, for the operator.
func loadMermaid(cfg Config) (*mermaidSetup, error) {
	if cfg.MermaidDir == "-" {
		return nil, errors.New("mermaid is turned off (no bundle folder)")
	}
	p := filepath.Join(cfg.MermaidDir, "mermaid.min.js")
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("mermaid is not installed (%s; run scripts/mermaid.sh)", p)
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	b, err := io.ReadAll(io.LimitReader(f, maxBundleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("mermaid: read %s: %w", p, err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != mermaidSHA256 {
		return nil, fmt.Errorf("mermaid: %s is not mermaid %s (SHA-256 %s; run scripts/mermaid.sh)", p, MermaidVersion, got)
	}
	chromium, err := findChromium(cfg.Chromium)
	if err != nil {
		return nil, fmt.Errorf("mermaid needs Chromium: %w", err)
	}
	return &mermaidSetup{chromium: chromium, script: string(b)}, nil
}

// The bounds of one Chromium process (each process of its group gets
// them; see startBrowser).
const (
	// browserDataBytes is RLIMIT_DATA: the private writable memory one
	// process may commit. An address-space limit (RLIMIT_AS, what TeX
	// gets) cannot be used: V8 reserves a terabyte of address space for
	// its sandbox and pointer cage up front, inaccessible until used.
	// Reserved pages do not count toward RLIMIT_DATA, committed ones do.
	browserDataBytes = limits.RenderMemoryBytes
	// browserHeapMB is V8's old-space limit (MB), so a layout that grows
	// without end fails in V8 before it reaches browserDataBytes.
	browserHeapMB = 512
	// browserCPUSeconds is RLIMIT_CPU of each process: a backstop only
	// (a diagram is stopped at its wall-clock Timeout, and its browser
	// with it); a process past it is killed and replaced like a crash.
	browserCPUSeconds = 900
	// browserFiles is RLIMIT_NOFILE: Chromium keeps a few hundred open.
	browserFiles = 4096
	// browserStart bounds starting a browser and preparing its first page.
	browserStart = 60 * time.Second
)

// browser is one Chromium process and its group.
type browser struct {
	pid int    // the browser process, leader of its process group
	dir string // its profile folder (and TMPDIR, HOME)
	// netns: it runs in a network namespace of its own.
	netns bool
	// exited is closed when the leader has been reaped.
	exited chan struct{}
	stderr *childproc.Capped // read only after exited

	// root holds the DevTools connection. chromedp binds a connection to
	// a context for the connection's life, so the browser keeps it: it is
	// the browser's own, never a request's, and cancelRoot ends it.
	root       context.Context
	cancelRoot context.CancelFunc
	cancelConn context.CancelFunc

	uses     int       // pages handed out (pool's lock)
	lastUsed time.Time // (pool's lock)
}

// browserArgs are Chromium's switches: headless, no GPU, nothing in the
// background that would reach the network, no host name resolves
// (--host-resolver-rules), quiet logs, DevTools on the pipe (fds 3 and 4).
// --no-sandbox: Chromium's own sandbox needs a setuid helper or user
// namespaces of its own, and refuses to run as root; the walls around the
// process (namespaces, rlimits, interception, CSP) are outprint's.
func browserArgs(dir string) []string {
	return []string{
		"--headless",
		"--no-sandbox",
		"--disable-gpu",
		"--disable-quic",
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--disable-breakpad",
		"--disable-crash-reporter",
		"--disable-extensions",
		"--disable-default-apps",
		"--disable-domain-reliability",
		"--disable-client-side-phishing-detection",
		"--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions",
		"--disable-dev-shm-usage",
		"--disable-background-timer-throttling",
		"--disable-renderer-backgrounding",
		"--disable-backgrounding-occluded-windows",
		"--metrics-recording-only",
		"--mute-audio",
		"--no-pings",
		"--password-store=basic",
		"--use-mock-keychain",
		"--host-resolver-rules=MAP * ~NOTFOUND",
		"--font-render-hinting=none",
		"--force-color-profile=srgb",
		"--log-level=3",
		"--js-flags=--max-old-space-size=" + strconv.Itoa(browserHeapMB),
		"--remote-debugging-pipe",
		"--user-data-dir=" + dir,
		"about:blank",
	}
}

// errNoNamespaces says the kernel refused new namespaces for the child.
var errNoNamespaces = errors.New("user namespaces not available")

// startBrowser starts a Chromium process in its walls and connects to it.
// ctx bounds the start only; the process lives until kill.
//
// The walls:
//   - prlimit(1) sets the rlimits (private memory, CPU, file size, files,
//     no core) before it executes Chromium, so no process of the group
//     ever runs without them; every process Chromium forks inherits them.
//   - Its own process group, which the pool kills whole; Pdeathsig kills
//     the browser if outprint dies.
//   - A new user and network namespace where the kernel allows them: the
//     only interface is a loopback that is down, so nothing in it can
//     connect anywhere, even past the walls below. Where they are refused
//     (a container's seccomp profile, a kernel setting) it runs without
//     them, and says so (Stats.Isolated).
//   - An empty environment but for HOME, TMPDIR and the XDG folders,
//     which point into a fresh profile folder removed with the process.
//   - Host names resolve nowhere (--host-resolver-rules), and each page
//     refuses every request by interception and by its
//     Content-Security-Policy (page.go).
//   - Nice 10 (childproc.Nice) for every process of the group, set before
//     the browser sees any input.
func startBrowser(ctx context.Context, chromium, tempDir string, isolate bool) (*browser, error) {
	if isolate {
		b, err := launch(ctx, chromium, tempDir, true)
		if !errors.Is(err, errNoNamespaces) {
			return b, err
		}
	}
	return launch(ctx, chromium, tempDir, false)
}

func launch(ctx context.Context, chromium, tempDir string, isolate bool) (*browser, error) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		return nil, fmt.Errorf("start chromium: prlimit: %w", err)
	}
	dir, err := os.MkdirTemp(tempDir, "outprint-chromium-")
	if err != nil {
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	// The browser reads commands from fd 3 and writes answers to fd 4.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		_ = os.RemoveAll(dir) // best-effort cleanup; the start error is the one to report
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		// Best-effort cleanup; the pipe error is the one to report.
		_ = cmdR.Close()
		_ = cmdW.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	argv := []string{
		"--data=" + strconv.FormatUint(browserDataBytes, 10),
		"--cpu=" + strconv.Itoa(browserCPUSeconds) + ":" + strconv.Itoa(browserCPUSeconds+1),
		"--fsize=" + strconv.FormatInt(limits.ScratchBytes, 10),
		"--nofile=" + strconv.Itoa(browserFiles),
		"--core=0",
		"--", chromium,
	}
	argv = append(argv, browserArgs(dir)...)
	cmd := exec.Command(prlimit, argv...)
	cmd.Dir = dir
	cmd.Env = []string{
		// TMPDIR is the profile folder, named relative to the working
		// folder (which it is): Chromium puts its process-singleton socket
		// in TMPDIR, and a socket's path has at most 107 bytes, which an
		// absolute path under a deep data folder passes (Chromium then
		// dies at start: "Socket path too long").
		"HOME=" + dir, "TMPDIR=.",
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"),
		"LANG=C.UTF-8",
		// No session bus: Chromium would look for one and log.
		"DBUS_SESSION_BUS_ADDRESS=disabled:",
	}
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	stderr := &childproc.Capped{Max: 8 << 10, Truncate: true}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if isolate {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
	}
	b := &browser{dir: dir, netns: isolate, exited: make(chan struct{}), stderr: stderr}
	started := make(chan error, 1)
	// The waiter goroutine is owned by the browser: it starts the process
	// and ends when the leader exits, which kill guarantees. It keeps its
	// OS thread locked for the process's life, because Pdeathsig fires
	// when the thread that started the child ends, not the process
	// (go.dev/issue/27505).
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		// The browser only ever ends by being killed (or crashing), so
		// its exit status says nothing; exited is what matters.
		_ = cmd.Wait()
		close(b.exited)
	}()
	err = <-started
	// The child holds its own copies of these ends; ours only need to
	// go, and a failed close of a pipe end loses no data.
	_ = cmdR.Close()
	_ = outW.Close()
	if err != nil {
		_ = cmdW.Close()
		_ = outR.Close()
		_ = os.RemoveAll(dir)
		if isolate && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
			errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES)) {
			return nil, fmt.Errorf("%w: %v", errNoNamespaces, err)
		}
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	b.pid = cmd.Process.Pid
	// Nice for the group now: Chromium forks its zygotes at once, and
	// every later process descends from one that has it.
	if err := b.deprioritize(); err != nil {
		b.kill()
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	connCtx, cancelConn := context.WithCancel(context.Background())
	actx, cancelAlloc := chromedp.NewAllocatorContext(connCtx, &pipeAllocator{r: outR, w: cmdW})
	root, cancelRoot := chromedp.NewContext(actx)
	b.root = root
	b.cancelRoot = func() { cancelRoot(); cancelAlloc() }
	b.cancelConn = cancelConn
	// Connect: the first call opens the pipe's connection, and chromedp
	// binds the connection to the context of that call, so it is root
	// itself. The start is bounded by killing the process, which ends
	// the call: past browserStart, or when ctx is done.
	killGroup := func() { _ = syscall.Kill(-b.pid, syscall.SIGKILL) } // ESRCH: already gone
	timer := time.AfterFunc(browserStart, killGroup)
	defer timer.Stop()
	stop := context.AfterFunc(ctx, killGroup)
	defer stop()
	if _, err := chromedp.CallBrowser(root, cdpbrowser.GetVersion, struct{}{}); err != nil {
		b.kill()
		return nil, fmt.Errorf("start chromium: connect: %w (%s)", err, b.stderrTail())
	}
	// Once more, for any process forked since the first call.
	if err := b.deprioritize(); err != nil {
		b.kill()
		return nil, fmt.Errorf("start chromium: %w", err)
	}
	return b, nil
}

// pipeAllocator hands chromedp the connection of a browser started by
// launch. It attaches: chromedp starts no process and treats every
// context as a tab.
type pipeAllocator struct {
	r io.ReadCloser
	w io.WriteCloser
}

func (a *pipeAllocator) Allocate(ctx context.Context, opts ...chromedp.BrowserOption) (*chromedp.Browser, error) {
	opts = append(opts, chromedp.WithBrowserLogf(func(string, ...any) {}), chromedp.WithBrowserErrorf(func(string, ...any) {}))
	return chromedp.NewBrowserTransport(ctx, chromedp.NewPipeConn(a.r, a.w), opts...)
}

func (a *pipeAllocator) Wait()          {}
func (a *pipeAllocator) Attaches() bool { return true }

// deprioritize sets the nice value of every process of the browser's
// group to childproc.Nice (never lowering a higher one: setpriority on
// the group sets one value, so it is skipped when the leader already has
// more).
func (b *browser) deprioritize() error {
	if n, err := childproc.NiceOf(b.pid); err == nil && n >= childproc.Nice {
		return nil
	}
	if err := unix.Setpriority(unix.PRIO_PGRP, b.pid, childproc.Nice); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("lower priority: %w", err)
	}
	return nil
}

// kill ends the browser: the connection, every process of its group (once
// more after the leader is reaped, for any child forked meanwhile), and its
// profile folder. Safe to call more than once.
func (b *browser) kill() {
	if b.cancelRoot != nil {
		b.cancelRoot()
	}
	if b.cancelConn != nil {
		b.cancelConn()
	}
	if b.pid > 0 {
		// ESRCH (the group is already gone) is the only expected error.
		_ = syscall.Kill(-b.pid, syscall.SIGKILL)
		<-b.exited
		_ = syscall.Kill(-b.pid, syscall.SIGKILL)
		// Processes of the group that outlived the leader (the zygote's
		// children) are not ours to reap; wait until none is left so
		// that the folder can go.
		waitGroupGone(b.pid, 5*time.Second)
	}
	_ = os.RemoveAll(b.dir) // best effort: kill has no error to return
}

// alive reports whether the leader still runs.
func (b *browser) alive() bool {
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

func (b *browser) stderrTail() string {
	select {
	case <-b.exited:
		s := strings.TrimSpace(string(b.stderr.Bytes()))
		if i := strings.LastIndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		return s
	default:
		return "still running"
	}
}

// groupMembers returns the pids of the processes in process group pgid.
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name (in parentheses): state ppid pgrp.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitGroupGone kills what is left of a process group until nothing is,
// for at most d.
func waitGroupGone(pgid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for len(groupMembers(pgid)) > 0 && time.Now().Before(deadline) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // ESRCH: the group just went
		time.Sleep(10 * time.Millisecond)
	}
}
