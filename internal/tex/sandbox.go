package tex

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/childproc"
)

// sandbox is how every TeX process is started: the program, the PATH it
// sees and the rlimits it gets.
type sandbox struct {
	program      string // absolute path of xelatex
	xdvipdfmx    string // absolute path of xdvipdfmx, "" if not found
	path         string // PATH inside the sandbox
	fonts        string // folder of the font copies (prepareTextFonts)
	memoryBytes  uint64
	processes    uint64
	scratchBytes int64
}

// env builds the environment of a TeX process from scratch: nothing of
// ours is inherited, so no secret (database URL, API keys) can be read by
// TeX or by anything it starts. dir is the scratch folder, which is also
// HOME: per-user caches and TEXMFHOME land there and vanish with it.
func (s *sandbox) env(dir string) []string {
	return []string{
		"PATH=" + s.path,
		"HOME=" + dir,
		"TMPDIR=" + dir,
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		"TEXMFVAR=" + filepath.Join(dir, ".texmf-var"),
		"TEXMFCONFIG=" + filepath.Join(dir, ".texmf-config"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, ".cache"),
		// The font copies of prepareTextFonts come first when XeTeX and
		// xdvipdfmx look a font file up by name; the trailing colon keeps
		// texmf.cnf's folders after it.
		"OSFONTDIR=" + s.fonts + ":",
		// Debian's texmf.cnf reads any file (openin_any=a); paranoid mode
		// refuses absolute paths, "..", and dot files for \input, \openin
		// and \openout alike.
		"openin_any=p",
		"openout_any=p",
		"shell_escape=f",
		// Never build fonts or formats on the fly: a missing font is an
		// error, not a METAFONT run.
		"MKTEXPK=0",
		"MKTEXTFM=0",
		"MKTEXMF=0",
		"MKTEXFMT=0",
		"MKTEXTEX=0",
		// Long log lines: an error message and its file:line stay on one
		// line, so the log parser never sees them cut.
		"max_print_line=10000",
		"error_line=254",
		"half_error_line=238",
		// XeTeX fills some 160 MB of arrays while it loads a format (eqtb
		// alone spans every Unicode code point), one 4 KiB page fault at
		// a time: a third of a warm-up's CPU went to faulting and
		// clearing pages. With transparent huge pages on request
		// (madvise, the common kernel default) glibc's malloc asks for
		// them, and the faults drop from some 41,000 to 3,700.
		"GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
	}
}

// noPDF as args' driver: XeLaTeX writes main.xdv and runs no driver (a
// zygote's child, whose xdvipdfmx is a zygote's child too).
const noPDF = "-"

// args are the flags of SPEC §7. The explicit -fmt (and -no-parse-first-line)
// keep a "%&format" first line of the preamble from choosing a format.
// driver, when set, replaces XeLaTeX's output driver (see Pool.warmUp).
func (s *sandbox) args(format, driver string) []string {
	if format == "" {
		format = "xelatex"
	}
	var out []string
	switch driver {
	case "":
	case noPDF:
		out = append(out, "-no-pdf")
	default:
		out = append(out, "-output-driver="+driver)
	}
	return append(out,
		"-fmt="+format,
		"-no-parse-first-line",
		"-no-shell-escape",
		"-no-mktex=tfm",
		"-no-mktex=tex",
		"-interaction=nonstopmode",
		"-halt-on-error",
		"-file-line-error",
		"main.tex",
	)
}

// proc is one started process: a TeX process, leader of its own process
// group, or a follower in the group of another.
type proc struct {
	cmd      *exec.Cmd        // nil for a zygote's child (see zygote.spawn)
	osp      *os.Process      // a zygote's child: found by pid, it is ours
	name     string           // the program's name, for errors
	state    *os.ProcessState // set by reap
	pid      int
	pgid     int           // the process group: pid for a leader
	exited   chan struct{} // closed by the waiter goroutine when the leader has exited (not reaped yet)
	exitedOK bool          // the leader exited with status 0; set before exited is closed
	readDone chan struct{} // closed by the reader goroutine at the end of the output
	out      *os.File      // read end of the output pipe; closed by the reader

	mu   sync.Mutex
	tail []byte // the last outputTail bytes of stdout+stderr

	killed atomic.Bool // killGroup was called before the process exited

	// follower is a process of the leader's group that finishes the
	// leader's work after it (the pre-started xdvipdfmx of a warm
	// process): wait waits for it too, reap reaps it first.
	follower *proc
	// followerDropped: wait killed the follower because its output was
	// not wanted (set by wait, read after it).
	followerDropped bool
	// followerGo, when set, is the follower's go pipe (a zygote's
	// child's xdvipdfmx, waiting, see shim.c): wait writes a byte to it
	// once the leader has written its output and exited successfully,
	// and closes it unwritten otherwise.
	followerGo *os.File
}

// spawn are the extras of a process started by startProgram.
type spawn struct {
	stdin *os.File   // nil: /dev/null
	extra []*os.File // become fds 3, 4, ...
	pgid  int        // join this process group; 0: lead a new one
	env   []string   // added to the sandbox's environment (a zygote's)
}

const outputTail = 16 << 10

// start starts program args in dir, in a process group of its own, with
// the sandbox's environment and rlimits. onLine is called for every line of
// output (stdout and stderr) from the reader goroutine; it must not block.
// cpuSeconds is the CPU-time rlimit.
//
// The rlimits are set with prlimit(2) on the child right after it starts.
// Between fork and that call the child runs unrestricted for a few
// microseconds; this is acceptable because the only thing it does in that
// time is exec XeLaTeX, which then spends tens of milliseconds loading its
// format before it could allocate much or fork (xdvipdfmx is started at the
// first page shipped). The alternative, re-executing outprint itself to set
// the limits before exec, needs the binary's path and a hidden command.
//
// RLIMIT_NPROC counts all processes of the user, not of the group, and is
// not enforced for root (CAP_SYS_RESOURCE); in a container running as root
// a pids cgroup is the bound that holds.
func (s *sandbox) start(dir string, args []string, cpuSeconds uint64, onLine func(string)) (*proc, error) {
	return s.startProgram(dir, s.program, args, cpuSeconds, onLine, spawn{})
}

// startProgram is start for any program of the sandbox, with extra files
// and, for a follower, the process group to join.
func (s *sandbox) startProgram(dir, program string, args []string, cpuSeconds uint64, onLine func(string), sp spawn) (*proc, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("output pipe: %w", err)
	}
	cmd := exec.Command(program, args...)
	cmd.Dir = dir
	cmd.Env = append(s.env(dir), sp.env...)
	if sp.stdin != nil {
		cmd.Stdin = sp.stdin
	} // else /dev/null: TeX can never wait at a prompt
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.ExtraFiles = sp.extra
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		Pgid:    sp.pgid,
		// If outprint itself dies, the kernel kills the process.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		return nil, fmt.Errorf("start %s: %w", program, err)
	}
	_ = pw.Close()
	p := &proc{
		cmd: cmd, name: filepath.Base(program), pid: cmd.Process.Pid, pgid: sp.pgid,
		exited: make(chan struct{}), readDone: make(chan struct{}), out: pr,
	}
	if p.pgid == 0 {
		p.pgid = p.pid
	}
	// The waiter goroutine is owned by the proc: it ends when the leader
	// exits, which every path guarantees by killing the group.
	go p.waitExit()
	// The reader goroutine is owned by the proc: it ends when every
	// process of the group has closed the pipe (they are all killed at
	// the end) or when reap closes the read end after a grace period.
	go p.read(onLine)
	if err := s.limit(p.pid, cpuSeconds); err != nil && !errors.Is(err, unix.ESRCH) {
		p.killGroup()
		p.reap()
		return nil, fmt.Errorf("rlimits: %w", err)
	}
	return p, nil
}

func (s *sandbox) limit(pid int, cpuSeconds uint64) error {
	set := func(resource int, cur, max uint64) error {
		return unix.Prlimit(pid, resource, &unix.Rlimit{Cur: cur, Max: max}, nil)
	}
	if err := set(unix.RLIMIT_AS, s.memoryBytes, s.memoryBytes); err != nil {
		return fmt.Errorf("address space: %w", err)
	}
	if err := set(unix.RLIMIT_NPROC, s.processes, s.processes); err != nil {
		return fmt.Errorf("processes: %w", err)
	}
	if err := set(unix.RLIMIT_FSIZE, uint64(s.scratchBytes), uint64(s.scratchBytes)); err != nil {
		return fmt.Errorf("file size: %w", err)
	}
	// SIGXCPU at the soft limit, SIGKILL one second later.
	if err := set(unix.RLIMIT_CPU, cpuSeconds, cpuSeconds+1); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	if err := set(unix.RLIMIT_CORE, 0, 0); err != nil {
		return fmt.Errorf("core: %w", err)
	}
	// TeX runs at a lower priority than the server, so that liveness
	// probes and refusals stay fast while every core typesets. What it
	// starts (the driver's shell, xdvipdfmx) and a zygote's children
	// inherit it; a child gets it again here all the same.
	if err := childproc.Deprioritize(pid); err != nil {
		return fmt.Errorf("priority: %w", err)
	}
	return nil
}

// waitExit blocks until the leader exits, without reaping it: while the
// leader is an unreaped zombie its pid, and so the group id, cannot be
// reused, so killing the group afterwards cannot hit a stranger.
func (p *proc) waitExit() {
	defer close(p.exited)
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			p.exitedOK = err == nil && info.Code == cldExited && exitStatus(&info) == 0
			return
		}
	}
}

func (p *proc) read(onLine func(string)) {
	defer close(p.readDone)
	defer func() { _ = p.out.Close() }()
	sc := bufio.NewScanner(p.out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		p.mu.Lock()
		p.tail = append(p.tail, line...)
		p.tail = append(p.tail, '\n')
		if len(p.tail) > 2*outputTail {
			p.tail = append(p.tail[:0], p.tail[len(p.tail)-outputTail:]...)
		}
		p.mu.Unlock()
		if onLine != nil {
			onLine(string(line))
		}
	}
	// A line over the buffer ends the scan; keep draining so TeX never
	// blocks on a full pipe.
	if sc.Err() != nil {
		buf := make([]byte, 32<<10)
		for {
			if _, err := p.out.Read(buf); err != nil {
				return
			}
		}
	}
}

// output returns the tail of the output of the process and its follower.
func (p *proc) output() string {
	p.mu.Lock()
	t := p.tail
	if len(t) > outputTail {
		t = t[len(t)-outputTail:]
	}
	out := string(t)
	p.mu.Unlock()
	if p.follower != nil {
		out += p.follower.output()
	}
	return out
}

// killGroup sends SIGKILL to every process of the group, and of the
// follower's group when it leads one of its own (a zygote child's
// xdvipdfmx, started before the child existed).
func (p *proc) killGroup() {
	select {
	case <-p.exited:
		// Exited by itself: reap need not wait for the group (a
		// follower's, after a render, whose scan of /proc costs the
		// server some milliseconds).
	default:
		p.killed.Store(true)
	}
	_ = unix.Kill(-p.pgid, unix.SIGKILL)
	if f := p.follower; f != nil && f.pgid != p.pgid {
		f.killGroup()
	}
}

// waitGroupDead waits (at most 5 s) until no process of the group runs:
// SIGKILL is delivered asynchronously, so members (sh, cat, xdvipdfmx) may
// still run for a moment after kill returns. Killed children whose parent
// died first stay zombies until init reaps them; they count as dead. It
// must run before the leader is reaped, which keeps the group id from
// being reused.
func waitGroupDead(pgid int) {
	deadline := time.Now().Add(5 * time.Second)
	for groupRuns(pgid) && time.Now().Before(deadline) {
		_ = unix.Kill(-pgid, unix.SIGKILL)
		time.Sleep(2 * time.Millisecond)
	}
}

// groupRuns reports whether a process of group pgid is alive and not a
// zombie, from /proc.
func groupRuns(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:])) // state, ppid, pgrp, ...
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}

// reap kills whatever is left of the group, reaps the follower and then
// the process (a leader last: while it is unreaped the group id cannot be
// reused) and waits for their output to end. It must be called exactly
// once, when the process has exited or its group has been killed.
func (p *proc) reap() *os.ProcessState {
	if p.followerGo != nil {
		_ = p.followerGo.Close() // unwritten: the follower exits
		p.followerGo = nil
	}
	<-p.exited
	if p.pgid == p.pid && p.killed.Load() {
		// We killed the group (timeout, cancel, shutdown): make sure it
		// is gone before the render returns.
		p.killGroup()
		waitGroupDead(p.pgid)
	}
	p.killGroup()
	if f := p.follower; f != nil {
		f.reap()
	}
	if p.cmd != nil {
		_ = p.cmd.Wait() // the exit status is in ProcessState
		p.state = p.cmd.ProcessState
	} else {
		p.state, _ = p.osp.Wait()
	}
	select {
	case <-p.readDone:
	case <-time.After(2 * time.Second):
		// Something outside the group holds the pipe; stop reading.
		_ = p.out.SetReadDeadline(time.Now())
		<-p.readDone
	}
	return p.state
}

// followerExited is closed when the follower has exited; nil (never
// ready) without a follower.
func (p *proc) followerExited() <-chan struct{} {
	if p.follower == nil {
		return nil
	}
	return p.follower.exited
}

// gone reports whether the process or its follower has exited.
func (p *proc) gone() bool {
	select {
	case <-p.exited:
		return true
	case <-p.followerExited():
		return true
	default:
		return false
	}
}

// cpu is the CPU time of the reaped process, its waited-for children and
// its follower.
func (p *proc) cpu() time.Duration {
	d := cpuTime(p.state)
	if p.follower != nil {
		d += p.follower.cpu()
	}
	return d
}

// maxRSS is the largest resident set, in bytes, of the reaped process,
// its waited-for children and its follower.
func (p *proc) maxRSS() int64 {
	var n int64
	if p.state != nil {
		if ru, ok := p.state.SysUsage().(*syscall.Rusage); ok {
			n = ru.Maxrss * 1024 // Linux reports kilobytes
		}
	}
	if p.follower != nil {
		n = max(n, p.follower.maxRSS())
	}
	return n
}

// followerError reports a reaped follower that failed (not one that wait
// killed on purpose).
func (p *proc) followerError() error {
	f := p.follower
	if f == nil || p.followerDropped || f.state == nil || f.state.Success() {
		return nil
	}
	return fmt.Errorf("%s failed (%v): %s", f.name, f.state, lastLines(f.output(), 3))
}

// errScratchFull is the cause when the scratch folder outgrew its bound.
var errScratchFull = errors.New("scratch folder full")

// wait waits until the process exits or ctx ends (then it kills the
// group), watching the scratch folder's size on the way; it always kills
// what is left of the group and reaps the leader. cause is nil when the
// process exited by itself, ctx.Err() or errScratchFull otherwise.
//
// With a follower, wait also waits for the follower to exit, unless
// dropFollower, called once the leader has exited by itself, returns true:
// then the follower is killed with the group (its output is not wanted).
func (p *proc) wait(ctx context.Context, dir string, maxScratch int64, inputs map[string]bool, dropFollower func() bool) (state *os.ProcessState, cause error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	waitFor := func(exited <-chan struct{}) error {
		for {
			select {
			case <-exited:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
				if scratchSize(dir, inputs) > maxScratch {
					return errScratchFull
				}
			}
		}
	}
	cause = waitFor(p.exited)
	if cause == nil && p.follower != nil {
		cause = p.followOn(dropFollower, waitFor)
	}
	if cause != nil {
		p.killGroup()
	}
	return p.reap(), cause
}

// followOn decides, once the leader has exited by itself, what becomes
// of the follower: dropped when dropFollower says so or when TeX failed
// (its output is incomplete and the failure is TeX's to report), else
// told to go and waited for with waitFor.
func (p *proc) followOn(dropFollower func() bool, waitFor func(exited <-chan struct{}) error) error {
	if dropFollower != nil && dropFollower() || p.followerGo != nil && !p.exitedOK {
		p.followerDropped = true
		return nil
	}
	if g := p.followerGo; g != nil {
		p.followerGo = nil
		_, err := g.Write([]byte{'g'})
		_ = g.Close()
		if err != nil {
			return fmt.Errorf("start %s: %w", p.follower.name, err)
		}
	}
	return waitFor(p.follower.exited)
}

// scratchSize sums the sizes of the files TeX wrote in dir (the inputs we
// placed there do not count).
func scratchSize(dir string, inputs map[string]bool) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if rel, _ := filepath.Rel(dir, path); inputs[rel] {
			return nil
		}
		if info, err := d.Info(); err == nil {
			total += info.Size()
		}
		return nil
	})
	return total
}

// cpuTime is the user+system time of a reaped process and of the children
// it waited for (xdvipdfmx).
func cpuTime(ps *os.ProcessState) time.Duration {
	if ps == nil {
		return 0
	}
	return ps.UserTime() + ps.SystemTime()
}

// procCPU reads the CPU time a live process has used so far (its own,
// not its children's): from /proc/PID/schedstat, in nanoseconds, where
// the kernel keeps it; else from /proc/PID/stat, in clock ticks of 10 ms,
// too coarse for a zygote's forks of a few milliseconds each.
func procCPU(pid int) time.Duration {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid)); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				return time.Duration(ns)
			}
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may
	// contain spaces: utime and stime are fields 14 and 15 of the line,
	// 12 and 13 after the name.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0
	}
	var ut, st int64
	_, _ = fmt.Sscan(fields[11], &ut)
	_, _ = fmt.Sscan(fields[12], &st)
	// USER_HZ is 100 on every Linux we run on.
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// cldExited is si_code CLD_EXITED: the process exited (not killed).
const cldExited = 1

// exitStatus is si_status of a SIGCHLD siginfo from waitid: the exit code
// when Code is CLD_EXITED (x/sys leaves the union's fields unnamed; on
// Linux si_status sits after si_pid and si_uid, 24 bytes in).
func exitStatus(info *unix.Siginfo) int32 {
	return *(*int32)(unsafe.Add(unsafe.Pointer(info), 24))
}
