package office

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
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
}
