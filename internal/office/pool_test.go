package office

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
)

func docxOf(t *testing.T, name string) ([]byte, Format) {
	t.Helper()
	b := readCorpus(t, name)
	f, err := Detect(b, name)
	if err != nil {
		t.Fatal(err)
	}
	return b, f
}

// TestConcurrent: four conversions at once on two slots all succeed, both
// processes work (every slot busy at once), and the two that wait get the
// processes the first two give back.
func TestConcurrent(t *testing.T) {
	p := mainPool(t)
	b, f := docxOf(t, "word-equations-omml.docx")
	before := p.Stats()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
			defer cancel()
			pdf, err := p.Convert(ctx, b, f, Options{})
			if err == nil && !strings.Contains(pdfText(t, pdf), "multilevel") {
				err = errors.New("the PDF lacks the word multilevel")
			}
			errs[i] = err
		}()
	}
	// Both slots are taken at once while four conversions want them.
	testenv.Eventually(t, "both processes busy at once", func() bool {
		busy := 0
		for _, ps := range p.Stats().Processes {
			if ps.Busy {
				busy++
			}
		}
		return busy == 2
	})
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("conversion %d: %v", i, err)
		}
	}
	after := p.Stats()
	if got := after.Conversions - before.Conversions; got != 4 {
		t.Errorf("Stats.Conversions grew by %d, want 4", got)
	}
	for i, ps := range after.Processes {
		if ps.Pid == 0 || ps.RSS <= 0 {
			t.Errorf("process %d: pid %d RSS %d, want a running process with memory", i, ps.Pid, ps.RSS)
		}
	}
	checkGroups(t, p)
}

// TestCancelReplaces: a conversion whose caller gives up mid-way gives its
// slot back, its process group is killed and replaced, and the next
// conversion works on the new one. The same for a deadline, which
// answers limits.Timeout.
func TestCancelReplaces(t *testing.T) {
	p := mainPool(t)
	big, bf := docxOf(t, "word-long-manual-toc-46p.docx")
	small, sf := docxOf(t, "word-google-docs.docx")
	for _, stop := range []string{CauseCancel, CauseTimeout} {
		t.Run(stop, func(t *testing.T) {
			if err := p.Warm(context.Background()); err != nil {
				t.Fatal(err)
			}
			before := p.Stats()
			var err error
			if stop == CauseCancel {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, err := p.Convert(ctx, big, bf, Options{})
					done <- err
				}()
				// Cancel while LibreOffice works on it.
				testenv.Eventually(t, "the conversion holds a process", func() bool {
					for _, ps := range p.Stats().Processes {
						if ps.Busy && ps.Pid != 0 {
							return true
						}
					}
					return false
				})
				cancel()
				err = <-done
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Convert cancelled = %v, want context.Canceled", err)
				}
			} else {
				// Both processes are warm and free: the request reaches
				// one at once, and 0.3 s is far too little for 46 pages.
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				_, err = p.Convert(ctx, big, bf, Options{})
				if k, code := kindOf(err); k != limits.KindTimeout || code != limits.CodeTimeout {
					t.Errorf("Convert past its deadline = %v, want a limits.Timeout", err)
				}
			}
			after := p.Stats()
			if after.Restarts[stop] != before.Restarts[stop]+1 {
				t.Errorf("Stats.Restarts[%s] = %d after, %d before: want one more", stop, after.Restarts[stop], before.Restarts[stop])
			}
			// The stopped process's group is gone, whole.
			gone := 0
			for _, ps := range before.Processes {
				if len(groupMembers(ps.Pid)) == 0 {
					gone++
				}
			}
			if gone != 1 {
				t.Errorf("%d of the processes before the %s are gone, want 1", gone, stop)
			}
			ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
			defer cancel()
			pdf, err := p.Convert(ctx, small, sf, Options{})
			if err != nil || pdfPages(t, pdf) != 1 {
				t.Fatalf("Convert after the %s = %v, want a one-page PDF", stop, err)
			}
			checkGroups(t, p)
		})
	}
}

// TestWalls: every process of a LibreOffice group runs at nice 10 under
// the rlimits, and, where the kernel allows it, in a network namespace of
// its own.
func TestWalls(t *testing.T) {
	p := mainPool(t)
	if err := p.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	ourNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range st.Processes {
		members := groupMembers(ps.Pid)
		if len(members) < 2 {
			t.Errorf("process group %d has %v, want the bridge and soffice", ps.Pid, members)
		}
		for _, pid := range members {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)) // gone meanwhile: checked below
			name := strings.TrimSpace(string(comm))
			nice, err := childproc.NiceOf(pid)
			if err != nil {
				continue
			}
			if nice < childproc.Nice {
				t.Errorf("%s (%d): nice %d, want at least %d", name, pid, nice, childproc.Nice)
			}
			lim, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
			if err != nil {
				continue
			}
			if !strings.Contains(string(lim), "Max data size             "+strconv.Itoa(officeMemoryBytes)) {
				t.Errorf("%s (%d): limits lack a data size of %d:\n%s", name, pid, officeMemoryBytes, lim)
			}
			if !strings.Contains(string(lim), "Max core file size        0") {
				t.Errorf("%s (%d): core files allowed:\n%s", name, pid, lim)
			}
			netns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
			if err == nil && st.Isolated && netns == ourNet {
				t.Errorf("%s (%d) shares outprint's network namespace though Stats.Isolated", name, pid)
			}
		}
	}
	if !st.Isolated && os.Getuid() == 0 {
		t.Logf("namespaces refused by this kernel: the processes run without them")
	}
}

// TestSocketDir: the sockets go in the pool's folder when it is short
// enough, else in a new folder of the temporary folder or, when that is
// too deep as well, of /dev/shm; each is short enough for a socket's path.
func TestSocketDir(t *testing.T) {
	short := "/var/lib/outprint/lo-1234567890"
	if got, err := socketDir(short); got != short || err != nil {
		t.Errorf("socketDir(%s) = %q, %v; want the folder itself", short, got, err)
	}
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", maxSocketDir))
	tmpShort, err := os.MkdirTemp("/tmp", "s") // t.TempDir's names are too long
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmpShort) }) // emptied below
	for _, tmp := range []string{tmpShort, deep} {
		t.Setenv("TMPDIR", tmp)
		got, err := socketDir(deep)
		if err != nil {
			t.Fatalf("socketDir(deep) with TMPDIR=%s: %v", tmp, err)
		}
		t.Cleanup(func() { _ = os.Remove(got) }) // made empty by socketDir
		if st, err := os.Stat(got); err != nil || !st.IsDir() || len(got) > maxSocketDir {
			t.Errorf("socketDir(deep) with TMPDIR=%s = %q (%v), want a new folder of at most %d bytes", tmp, got, err, maxSocketDir)
		}
		want := tmp
		if tmp == deep {
			want = "/dev/shm"
		}
		if filepath.Dir(got) != want {
			t.Errorf("socketDir(deep) with TMPDIR=%s = %q, want a folder in %s", tmp, got, want)
		}
	}
}

// TestSlotCPU: with two or more slots and no more than the CPUs each
// slot's process group keeps to a CPU of its own, the bridge (leader of
// the group) included; one slot, or more slots than CPUs, pins none.
func TestSlotCPU(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	n := set.Count()
	if got := slotCPU(0, n+1); got != -1 {
		t.Errorf("slotCPU(0, %d) = %d, want -1 (more slots than CPUs)", n+1, got)
	}
	if got := slotCPU(0, 1); got != -1 {
		t.Errorf("slotCPU(0, 1) = %d, want -1 (one slot keeps every CPU)", got)
	}
	if n < 2 {
		testenv.Missing(t, "two CPUs (this process may use one)")
	}
	p := mainPool(t)
	seen := map[string]bool{}
	for _, ps := range p.Stats().Processes {
		want := slotCPU(ps.Slot, len(p.slots))
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ps.Pid))
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				got = strings.TrimSpace(v)
			}
		}
		if want < 0 || got != strconv.Itoa(want) {
			t.Errorf("slot %d's bridge (pid %d) may use CPUs %q, want only CPU %d", ps.Slot, ps.Pid, got, want)
		}
		seen[got] = true
	}
	if len(seen) != len(p.slots) {
		t.Errorf("the slots' CPUs %v, want one of its own for each of %d slots", seen, len(p.slots))
	}
}
