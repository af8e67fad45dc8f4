package office

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/limits"
)

// The bounds of one LibreOffice process group (the bridge and every
// process soffice forks inherit them).
const (
	// officeMemoryBytes is RLIMIT_DATA, the private writable memory one
	// process may commit: TeX's memory bound. An address-space limit
	// (RLIMIT_AS, what TeX gets) is not used: soffice maps its hundreds
	// of libraries and reserves address space it never touches.
	officeMemoryBytes = limits.RenderMemoryBytes
	// officeCPUSeconds is RLIMIT_CPU of each process: a backstop only,
	// since the process lives across conversions (each is bounded by its
	// deadline); a process past it dies and is replaced like a crash.
	officeCPUSeconds = 1800
	// officeFiles is RLIMIT_NOFILE.
	officeFiles = 1024
)

// No RLIMIT_NPROC, unlike TeX: it counts every process and thread of the
// user, not of the group, and in a user namespace even root is held to
// it, so a soffice (a few dozen threads) beside a busy server would fail
// to start a thread and refuse documents it can read. The container's
// pids limit is the bound that holds the group, as for Chromium.

// errNoNamespaces says the kernel refused new namespaces for the bridge.
var errNoNamespaces = errors.New("user namespaces not available")

// proc is one warm LibreOffice: the Python bridge (leader of its process
// group) and the soffice it started, with its own folder (profile,
// temporary files, sockets).
type proc struct {
	pid      int // the bridge, leader of the group
	soffice  int // soffice.bin, as the bridge reports
	dir      string
	sock     string
	isolated bool
	stdin    io.WriteCloser
	life     *os.File      // the write end of the bridge's watch pipe: its end (close, or outprint's death) kills the group
	lines    chan []byte   // the bridge's answers; closed when stdout ends
	exited   chan struct{} // closed when the leader exited
	stderr   *childproc.Capped
	uses     int
}

// procSpec is what starting a process needs.
type procSpec struct {
	python, bridge, soffice string
	dir                     string // the process's folder, created by the caller
	sock                    string // the folder of its UNO sockets, created by the caller
	isolate                 bool
	cpu                     int // the CPU the group keeps to (the bridge sets it before soffice starts), -1 for any
}

// startProc starts a bridge and its soffice in their walls and waits
// until soffice answers over UNO, at most ctx.
//
// The walls, all set before soffice starts (the bridge waits for its
// configuration line, sent after them, to start it):
//   - its own process group, killed whole; the bridge kills it whole
//     when its watch pipe ends, which outprint's death does;
//   - new user and network namespaces where the kernel allows them: the
//     only interface is a loopback that is down, so no link, image or
//     entity in a document can reach any host;
//   - the rlimits above and nice 10 (childproc), inherited by soffice;
//   - an environment of its own: HOME and TMPDIR inside the process's
//     folder, and its UNO sockets too where /tmp is not writable
//     (OSL_SOCKET_PATH; else in /tmp, under a name of its own).
func startProc(ctx context.Context, s procSpec) (*proc, error) {
	if s.isolate {
		p, err := launch(ctx, s, true)
		if !errors.Is(err, errNoNamespaces) {
			return p, err
		}
	}
	return launch(ctx, s, false)
}

func launch(ctx context.Context, s procSpec, isolate bool) (*proc, error) {
	for _, d := range []string{"profile/user", "tmp"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("start LibreOffice: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.dir, "profile/user/registrymodifications.xcu"), profileXCU, 0o600); err != nil {
		return nil, fmt.Errorf("start LibreOffice: %w", err)
	}
	// The watch pipe: the bridge reads fd 3 in a thread of its own and
	// kills its whole group when the pipe ends. The kernel closes this
	// write end however outprint ends, SIGKILL included, so no soffice
	// outlives it (a parent-death signal reaches the bridge only, not
	// soffice.bin, the bridge's child).
	watchR, life, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start LibreOffice: %w", err)
	}
	cmd := exec.Command(s.python, "-I", s.bridge, "3")
	cmd.ExtraFiles = []*os.File{watchR}
	cmd.Dir = filepath.Join(s.dir, "tmp")
	cmd.Env = []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + filepath.Join(s.dir, "profile"),
		"TMPDIR=" + filepath.Join(s.dir, "tmp"),
		"LANG=C.UTF-8",
		// LibreOffice's UNO pipes (soffice's own and the bridge's
		// connection) are sockets in /tmp, or /var/tmp, where either is
		// writable, and in this folder only where neither is (the
		// container image's read-only root).
		"OSL_SOCKET_PATH=" + s.sock,
		// No desktop: soffice uses its headless backend and no bus.
		"SAL_USE_VCLPLUGIN=svp",
		"DBUS_SESSION_BUS_ADDRESS=disabled:",
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		_, _ = watchR.Close(), life.Close() // never used
		return nil, fmt.Errorf("start LibreOffice: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		_, _, _ = stdin.Close(), watchR.Close(), life.Close() // never used
		return nil, fmt.Errorf("start LibreOffice: %w", err)
	}
	stderr := &childproc.Capped{Max: 8 << 10, Truncate: true}
	cmd.Stderr = stderr
	// No Pdeathsig: it would kill the bridge before its watch thread
	// could kill the rest of the group; the watch pipe does both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if isolate {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET
		// Inside, the process keeps its own uid and gid (mapped to
		// themselves) rather than the overflow id 65534: soffice started
		// as "nobody" aborted whenever another LibreOffice on the host
		// started or ended.
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	p := &proc{dir: s.dir, sock: s.sock, isolated: isolate, stdin: stdin, life: life, lines: make(chan []byte, 1), exited: make(chan struct{}), stderr: stderr}
	started := make(chan error, 1)
	// The waiter goroutine is owned by the proc: it starts the process
	// and ends when the leader exits, which kill guarantees.
	go func() {
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait() // how it ended is no news: every end replaces it
		close(p.exited)
	}()
	err = <-started
	_ = watchR.Close() // the bridge has its copy, or never started
	if err != nil {
		_, _ = stdin.Close(), life.Close() // never used
		if isolate && (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) ||
			errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES)) {
			return nil, fmt.Errorf("%w: %v", errNoNamespaces, err)
		}
		return nil, fmt.Errorf("start LibreOffice: %w", err)
	}
	p.pid = cmd.Process.Pid
	// The reader goroutine is owned by the proc: it ends when stdout
	// closes, which the group's kill guarantees.
	go func() {
		defer close(p.lines)
		r := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 && err == nil {
				p.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	if err := childproc.Deprioritize(p.pid); err != nil {
		p.kill()
		return nil, fmt.Errorf("start LibreOffice: %w", err)
	}
	if err := childproc.Lower(p.pid,
		childproc.Limit{Resource: unix.RLIMIT_DATA, Cur: officeMemoryBytes, Max: officeMemoryBytes},
		childproc.Limit{Resource: unix.RLIMIT_CPU, Cur: officeCPUSeconds, Max: officeCPUSeconds + 1},
		childproc.Limit{Resource: unix.RLIMIT_FSIZE, Cur: limits.ScratchBytes, Max: limits.ScratchBytes},
		childproc.Limit{Resource: unix.RLIMIT_NOFILE, Cur: officeFiles, Max: officeFiles},
		childproc.Limit{Resource: unix.RLIMIT_CORE, Cur: 0, Max: 0},
	); err != nil {
		p.kill()
		return nil, fmt.Errorf("start LibreOffice: rlimits: %w", err)
	}
	hello, err := json.Marshal(map[string]any{
		"soffice": s.soffice,
		"profile": fileURL(filepath.Join(s.dir, "profile")),
		"pipe":    pipeName(s.dir),
		"warm":    fileURL(filepath.Join(s.dir, "tmp", "warm.pdf")),
		"cpu":     s.cpu,
	})
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("start LibreOffice: %w", err)
	}
	if _, err := p.stdin.Write(append(hello, '\n')); err != nil {
		p.kill()
		return nil, fmt.Errorf("start LibreOffice: %w (%s)", err, p.stderrTail())
	}
	var ready struct {
		Ready bool `json:"ready"`
		Pid   int  `json:"pid"`
	}
	line, err := p.answer(ctx)
	if err == nil {
		err = json.Unmarshal(line, &ready)
	}
	if err == nil && !ready.Ready {
		err = fmt.Errorf("unexpected answer %q", line)
	}
	if err != nil {
		p.kill()
		return nil, fmt.Errorf("start LibreOffice: %w (%s)", err, p.stderrTail())
	}
	p.soffice = ready.Pid
	return p, nil
}

// errExited says the process ended before it answered.
var errExited = errors.New("LibreOffice stopped")

// answer waits for the bridge's next line, ctx, or the process's end.
func (p *proc) answer(ctx context.Context) ([]byte, error) {
	select {
	case line, ok := <-p.lines:
		if !ok {
			return nil, errExited
		}
		return line, nil
	case <-p.exited:
		// A last answer may have been written just before the end.
		select {
		case line, ok := <-p.lines:
			if ok {
				return line, nil
			}
		default:
		}
		return nil, errExited
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// alive reports whether the leader still runs.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill ends the process: every process of its group (once more after the
// leader is reaped, for any child forked meanwhile) and its folder (the
// profile, the sockets). Safe to call more than once.
func (p *proc) kill() {
	if p.pid > 0 {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL) // ESRCH: gone already
		<-p.exited
		_ = p.stdin.Close() // the process is gone; nothing to flush
		_ = p.life.Close()  // likewise
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		// Processes of the group that outlived the leader (soffice.bin)
		// are not ours to reap; wait until none is left so that the
		// folder can go.
		waitGroupGone(p.pid, 5*time.Second)
	}
	_ = os.RemoveAll(p.dir)  // best effort: a later Close removes the pool's folder
	_ = os.RemoveAll(p.sock) // and the sockets' folder
	// The UNO socket is in /tmp where /tmp is writable (pipeName), and a
	// killed soffice leaves it behind: one file per process.
	stale, _ := filepath.Glob(filepath.Join("/tmp", "OSL_PIPE_*_"+pipeName(p.dir))) // only ErrBadPattern, not with this pattern
	for _, f := range stale {
		_ = os.Remove(f) // best effort, as the folders above
	}
}

func (p *proc) stderrTail() string {
	s := strings.TrimSpace(string(p.stderr.Bytes()))
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		// soffice's one warning on a system without Java is no news.
		if l != "" && !strings.Contains(l, "javaldx") {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return "no output"
	}
	return keep[len(keep)-1]
}

// rss is the resident memory of the process group, read from /proc: the
// bridge and soffice.bin, which the bridge starts itself (no launcher).
// It is read after every conversion, so it reads their two files rather
// than look through /proc for the group's members.
func (p *proc) rss() int64 {
	var total int64
	for _, pid := range []int{p.pid, p.soffice} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		pages, err := strconv.ParseInt(f[1], 10, 64)
		if err == nil {
			total += pages * int64(os.Getpagesize())
		}
	}
	return total
}

// groupMembers returns the pids of the live processes in process group
// pgid.
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
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // ESRCH: gone meanwhile
		time.Sleep(10 * time.Millisecond)
	}
}

// fileURL is the file: URL of an absolute path, as LibreOffice reads it.
func fileURL(path string) string {
	var b strings.Builder
	b.WriteString("file://")
	for _, c := range []byte(path) {
		if c == '/' || c == '-' || c == '_' || c == '.' || c == '~' ||
			'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// pipeName is the name of the UNO pipe of the process whose folder is dir:
// one of its own. LibreOffice puts its pipes in /tmp where /tmp is
// writable, whatever OSL_SOCKET_PATH says, so with one fixed name every
// process of every pool listened on the same socket, and a bridge could
// connect to another process's soffice: when that one was replaced (a timeout, a cancel),
// the bridge's connection ended under a document that had nothing to do
// with it ("Binary URP bridge already disposed").
//
// The name carries the pid of the outprint that made it, so that a later
// pool can tell the sockets a SIGKILLed outprint left in /tmp from those of
// a running one (sweepSockets).
func pipeName(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return fmt.Sprintf("%s%d-%s", pipePrefix, os.Getpid(), hex.EncodeToString(sum[:8]))
}

// pipePrefix starts the name of every UNO pipe of outprint's processes.
const pipePrefix = "outprint-"

// sweepSockets removes the UNO sockets in dir (LibreOffice's /tmp) of
// outprint processes that are gone: a killed outprint cannot remove its
// own, and each would stay until the machine restarts. A socket whose
// outprint still runs (another server on the machine) is left alone; so,
// at worst, is one whose pid a new process reuses. It returns how many it
// removed.
func sweepSockets(dir string) int {
	names, _ := filepath.Glob(filepath.Join(dir, "OSL_PIPE_*_"+pipePrefix+"*")) // only ErrBadPattern, not with this pattern
	n := 0
	for _, name := range names {
		base := filepath.Base(name)
		rest := base[strings.Index(base, "_"+pipePrefix)+1+len(pipePrefix):]
		pidText, _, ok := strings.Cut(rest, "-")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue // alive (or not ours to signal: EPERM)
		}
		if st, err := os.Lstat(name); err != nil || st.Mode().Type() != os.ModeSocket {
			continue
		}
		if os.Remove(name) == nil {
			n++
		}
	}
	return n
}
