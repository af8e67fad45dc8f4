package office

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/outprint/outprint/internal/testenv"
)

// orphanChild is the test binary run again by TestOrphans: it starts a
// warm pool in dir, says "ready" on stdout and waits to be killed.
func orphanChild(dir string) int {
	p, err := NewPool(context.Background(), Config{Dir: dir, Slots: 1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
	defer cancel()
	if err := p.Warm(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	<-ctx.Done() // the parent kills this process long before
	return 1
}

// TestOrphans: when the Go process that owns a pool is SIGKILLed (no
// Close, no deferred function runs), none of the pool's LibreOffice
// processes outlives it.
func TestOrphans(t *testing.T) {
	testenv.Require(t, tools...)
	dir, err := os.MkdirTemp("", "oo-") // short: LibreOffice's sockets go in it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) }) // best effort: checked empty of processes below
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill() // it failed already
		_ = cmd.Wait()         // its error is the read's
		t.Fatalf("pool in a child process: read %q, %v; want ready", line, err)
	}
	if left := processesUnder(dir); !strings.Contains(strings.Join(left, " "), "soffice") {
		t.Fatalf("processes under %s before the kill: %v, want a soffice", dir, left)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the error says so
	testenv.Eventually(t, "no LibreOffice process of the killed pool left", func() bool {
		return len(processesUnder(dir)) == 0
	})

	// The killed pool's UNO socket stays in /tmp (LibreOffice's, not
	// ours to place) until the next pool on the machine sweeps it.
	sockets := func() []string {
		names, _ := filepath.Glob(fmt.Sprintf("/tmp/OSL_PIPE_*_%s%d-*", pipePrefix, cmd.Process.Pid)) // only ErrBadPattern
		return names
	}
	if len(sockets()) == 0 {
		t.Fatalf("no /tmp/OSL_PIPE_*_%s%d-* socket after the kill: the sweep below would prove nothing", pipePrefix, cmd.Process.Pid)
	}
	p, err := NewPool(context.Background(), Config{Dir: dir, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if left := sockets(); len(left) != 0 {
		t.Errorf("the killed pool's sockets after a new pool started: %v, want none", left)
	}
}

// TestSweepSockets: only the sockets of outprint processes that are gone
// are removed.
func TestSweepSockets(t *testing.T) {
	dir := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	listen := func(name string) string {
		path := filepath.Join(dir, name)
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	deadSock := listen(fmt.Sprintf("OSL_PIPE_1000_%s%d-0123456789abcdef", pipePrefix, gone.Process.Pid))
	liveSock := listen(fmt.Sprintf("OSL_PIPE_1000_%s%d-0123456789abcdef", pipePrefix, os.Getppid()))
	selfSock := listen(fmt.Sprintf("OSL_PIPE_1000_%s%d-0123456789abcdef", pipePrefix, os.Getpid()))
	otherSock := listen(fmt.Sprintf("OSL_PIPE_1000_SingleOfficeIPC_%d", gone.Process.Pid))
	plain := filepath.Join(dir, fmt.Sprintf("OSL_PIPE_1000_%s%d-fedcba9876543210", pipePrefix, gone.Process.Pid))
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := sweepSockets(dir); n != 1 {
		t.Errorf("sweepSockets(dir) = %d, want 1", n)
	}
	for path, want := range map[string]bool{deadSock: false, liveSock: true, selfSock: true, otherSock: true, plain: true} {
		_, err := os.Lstat(path)
		if got := err == nil; got != want {
			t.Errorf("after sweepSockets, %s exists = %v, want %v", filepath.Base(path), got, want)
		}
	}
}
