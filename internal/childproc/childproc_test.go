package childproc

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCapped(t *testing.T) {
	tests := []struct {
		name     string
		truncate bool
		writes   []string
		kept     string
		over     bool
		err      error
	}{
		{"within", false, []string{"abc", "de"}, "abcde", false, nil},
		{"exactly", false, []string{"abcdef"}, "abcdef", false, nil},
		{"over fails", false, []string{"abcd", "efgh"}, "abcdef", true, ErrOutputTooLarge},
		{"over truncates", true, []string{"abcd", "efgh"}, "abcdef", true, nil},
	}
	for _, tt := range tests {
		c := &Capped{Max: 6, Truncate: tt.truncate}
		var err error
		for _, w := range tt.writes {
			if _, e := c.Write([]byte(w)); e != nil {
				err = e
			}
		}
		if string(c.Bytes()) != tt.kept || c.Over() != tt.over || !errors.Is(err, tt.err) {
			t.Errorf("%s: Capped = %q over %v err %v, want %q over %v err %v", tt.name, c.Bytes(), c.Over(), err, tt.kept, tt.over, tt.err)
		}
	}
}

// TestLower sets limits on a real child and reads them back from
// /proc/PID/limits; a limit above the inherited hard one is clamped.
func TestLower(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// sleep 30 still runs: a kill that fails leaves it behind.
		if err := cmd.Process.Kill(); err != nil {
			t.Errorf("kill sleep: %v", err)
		}
		_ = cmd.Wait() // reaps it; its error is the kill
	})
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &own); err != nil {
		t.Fatal(err)
	}
	err := Lower(cmd.Process.Pid,
		Limit{Resource: unix.RLIMIT_CPU, Cur: 7, Max: 8},
		Limit{Resource: unix.RLIMIT_NOFILE, Cur: own.Max + 100, Max: own.Max + 100})
	if err != nil {
		t.Fatalf("Lower: %v", err)
	}
	out, err := exec.Command("cat", "/proc/"+strconv.Itoa(cmd.Process.Pid)+"/limits").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Max cpu time              7                    8", "Max open files            " + strconv.FormatUint(own.Max, 10)} {
		if !strings.Contains(string(out), want) {
			t.Errorf("/proc/PID/limits lacks %q:\n%s", want, out)
		}
	}
}

// TestDeprioritize: a started process runs at Nice afterwards, as
// /proc/PID/stat shows; one already at a higher nice value keeps it.
func TestDeprioritize(t *testing.T) {
	// Deprioritize sets Nice; DeprioritizeTo 15 is below TeX (page
	// previews). Neither brings a higher value back up.
	tests := []struct {
		name   string
		to     int
		before []int
		set    func(pid int) error
	}{
		{"Deprioritize", Nice, []int{0, 5, Nice, 15}, Deprioritize},
		{"DeprioritizeTo(15)", 15, []int{0, Nice, 15, 19}, func(pid int) error { return DeprioritizeTo(pid, 15) }},
	}
	for _, tc := range tests {
		for _, before := range tc.before {
			cmd := exec.Command("sleep", "30")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			if err := unix.Setpriority(unix.PRIO_PROCESS, pid, before); err != nil {
				t.Fatal(err)
			}
			err := tc.set(pid)
			got, nerr := NiceOf(pid)
			if want := max(before, tc.to); err != nil || nerr != nil || got != want {
				t.Errorf("%s(process at nice %d) = %v; NiceOf = %d, %v, want %d", tc.name, before, err, got, nerr, want)
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			// Wait reports the kill ("signal: killed"): expected, not an error.
			_ = cmd.Wait()
		}
	}
	if _, err := NiceOf(1 << 30); !errors.Is(err, unix.ESRCH) {
		t.Errorf("NiceOf(no such process) = %v, want ESRCH", err)
	}
	if err := Deprioritize(1 << 30); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Deprioritize(no such process) = %v, want ESRCH", err)
	}
}
