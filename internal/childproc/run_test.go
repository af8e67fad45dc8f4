package childproc

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRun: a filter's output comes back, past MaxOutput it is stopped,
// its rlimits hold, and namespaces are asked for when Isolate is set.
// The rlimit and nice cases read their input first, as every converter
// does: Run promises the walls before the first byte of input, not before
// the child's first instruction (a shell that printed ulimit -n at once
// raced the prlimit call and once showed the inherited 20000 in CI).
func TestRun(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		f            Filter
		out          string
		overflow     bool
		exitNonZero  bool
		noNamespaces bool
	}{
		{name: "echo", f: Filter{Path: sh, Args: []string{"-c", "cat"}, Input: []byte("hello"), MaxOutput: 100}, out: "hello"},
		{name: "overflow", f: Filter{Path: sh, Args: []string{"-c", "cat"}, Input: []byte(strings.Repeat("x", 1000)), MaxOutput: 10}, overflow: true},
		{name: "rlimit", f: Filter{Path: sh, Args: []string{"-c", "read x; ulimit -n"}, Input: []byte("go\n"), MaxOutput: 100,
			Limits: []Limit{{Resource: unix.RLIMIT_NOFILE, Cur: 64, Max: 64}}}, out: "64\n"},
		{name: "nice", f: Filter{Path: sh, Args: []string{"-c", "read x; cut -d' ' -f19 /proc/self/stat"}, Input: []byte("go\n"), MaxOutput: 100}, out: "10\n"},
		{name: "failure", f: Filter{Path: sh, Args: []string{"-c", "exit 3"}, MaxOutput: 100}, exitNonZero: true},
	}
	for _, tc := range tests {
		res, err := Run(context.Background(), tc.f)
		if err != nil {
			t.Errorf("Run(%s) error = %v", tc.name, err)
			continue
		}
		if tc.overflow != res.Overflow {
			t.Errorf("Run(%s) Overflow = %v, want %v", tc.name, res.Overflow, tc.overflow)
		}
		if !tc.overflow && string(res.Output) != tc.out {
			t.Errorf("Run(%s) output = %q, want %q", tc.name, res.Output, tc.out)
		}
		var ee *exec.ExitError
		if tc.exitNonZero != errors.As(res.Err, &ee) {
			t.Errorf("Run(%s) Err = %v, want exit error %v", tc.name, res.Err, tc.exitNonZero)
		}
	}
}

// TestRunCancel: ctx done kills the whole group, a grandchild included.
func TestRunCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	type ran struct {
		res FilterResult
		err error
	}
	done := make(chan ran, 1)
	go func() {
		// The shell waits for its sleeping child: Run returns only when
		// the group is killed (or the test's own timeout ends it).
		res, err := Run(ctx, Filter{Path: "/bin/sh", Args: []string{"-c", "sleep 300 & wait"}, MaxOutput: 100})
		done <- ran{res, err}
	}()
	cancel()
	r := <-done
	if r.err == nil && r.res.Err == nil {
		t.Errorf("Run after cancel = %+v, nil, want the process killed or not started", r.res)
	}
}
