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
	defer cmd.Process.Kill()
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
