package tex

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

func TestPoolMemoryDefault(t *testing.T) {
	gib := int64(1 << 30)
	tests := []struct {
		name  string
		files map[string]string
		want  int64
	}{
		// The worker container of compose.yaml: 1 GiB.
		{"container of 1 GiB", map[string]string{
			"cgroup/memory.max": fmt.Sprint(gib), "meminfo": fmt.Sprintf("MemTotal: %d kB\n", 64*gib>>10),
		}, gib/5*4 - serverBytes},
		{"machine only", map[string]string{"meminfo": fmt.Sprintf("MemTotal: %d kB\n", 8*gib>>10)}, 8*gib/5*4 - serverBytes},
		{"tiny: one process of its own", map[string]string{"cgroup/memory.max": fmt.Sprint(256 << 20)}, ownBytes},
		{"nothing to read", map[string]string{}, math.MaxInt64 / 4},
	}
	for _, tt := range tests {
		m := fakeMachine(t, tt.files, 2)
		if got := poolMemory(m); got != tt.want {
			t.Errorf("poolMemory(%s) = %d, want %d", tt.name, got, tt.want)
		}
	}
	if got := DefaultPoolMemory(); got < ownBytes {
		t.Errorf("DefaultPoolMemory() = %d, want at least %d", got, int64(ownBytes))
	}
}

// variant returns testPreamble with a class option: another profile (as a
// paper size is) with a format of its own.
func variant(opt string) string {
	return strings.Replace(testPreamble, "{article}", "["+opt+"]{article}", 1)
}

// TestPoolBudget: two preambles kept warm (Min 1) get as many warm
// processes as the memory budget holds, never more, and each still
// renders: a render finds room by stopping another preamble's process.
func TestPoolBudget(t *testing.T) {
	preambles := []string{testPreamble, variant("12pt")}
	tests := []struct {
		name   string
		budget int64
		want   int // warm processes once the pool settled
	}{
		{"room for both", 8 * ownBytes, 2},
		{"room for one", ownBytes, 1},
		{"room for none", ownBytes / 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Warm processes of their own, so each counts ownBytes.
			p := newTestPool(t, PoolConfig{Min: 1, Max: 4, Memory: tt.budget, Preambles: preambles, Zygote: ZygoteConfig{Off: true}})
			testenv.Eventually(t, fmt.Sprintf("%d warm processes", tt.want), func() bool {
				s := p.Stats()
				return s.Warm == tt.want && s.Warming == 0
			})
			for _, pre := range preambles {
				res, err := p.Run(context.Background(), Job{Preamble: pre, Body: "Within the budget.\n"})
				if err != nil {
					t.Fatalf("Run = %v", err)
				}
				if got := pdfText(t, res.PDF); !strings.Contains(got, "Within the budget.") {
					t.Errorf("pdftotext = %q", got)
				}
			}
			testenv.Eventually(t, "a settled pool", func() bool { s := p.Stats(); return s.Busy == 0 && s.Warming == 0 })
			if s := p.Stats(); s.Warm > max(tt.want, 1) {
				t.Errorf("warm processes after the renders = %d, want at most %d", s.Warm, max(tt.want, 1))
			}
			if n := len(idleTeX(p.cfg.Runner.TempDir, "xelatex")); n > max(tt.want, 1) {
				t.Errorf("xelatex processes alive = %d, want at most %d", n, max(tt.want, 1))
			}
			p.mu.Lock()
			peak := p.memPeak
			p.mu.Unlock()
			// A render may always have one process: the floor.
			if limit := max(tt.budget, ownBytes); peak > limit {
				t.Errorf("peak estimated memory = %d MiB, want at most %d MiB", peak>>20, limit>>20)
			}
		})
	}
}

// TestPoolBudgetZygotes: with room for one zygote and its child, a
// profile in use gets no spare zygote and no process of its own beside
// them, and renders with the zygote's children.
func TestPoolBudgetZygotes(t *testing.T) {
	requireGCC(t)
	budget := int64(zygoteBytes + 2*childBytes)
	p := newTestPool(t, PoolConfig{Min: 1, Max: 4, Memory: budget, Preambles: []string{testPreamble}})
	testenv.Eventually(t, "a zygote and a slot", func() bool { s := p.Stats(); return s.Zygotes == 1 && newestIsSlot(p) })
	for i := range 3 {
		res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: fmt.Sprintf("Render %d.\n", i)})
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		if res.Forked == 0 {
			t.Errorf("render %d was not a zygote's child", i)
		}
		testenv.Eventually(t, "a settled pool", func() bool { s := p.Stats(); return s.Busy == 0 && s.Warming == 0 && s.ZygotesStarting == 0 })
	}
	s := p.Stats()
	if s.Zygotes != 1 {
		t.Errorf("zygotes = %d, want 1 (no room for a spare)", s.Zygotes)
	}
	p.mu.Lock()
	peak := p.memPeak
	p.mu.Unlock()
	if peak > budget {
		t.Errorf("peak estimated memory = %d MiB, want at most the budget %d MiB", peak>>20, budget>>20)
	}
}

// TestPoolRetiresIdleProfiles: a profile nobody used for the idle timeout
// (by the pool's clock, advanced by the test) loses its zygotes and warm
// processes; the profile kept warm (Min) keeps one zygote, no spare, and
// its warm process, and renders at once afterwards.
func TestPoolRetiresIdleProfiles(t *testing.T) {
	requireGCC(t)
	clock := &testenv.Clock{}
	const idle = 3 * time.Minute // of the test's clock
	p := newTestPool(t, PoolConfig{Min: 1, Max: 4, IdleTimeout: idle, Clock: clock, Preambles: []string{testPreamble}})
	letter := variant("letterpaper")
	for _, pre := range []string{testPreamble, letter, testPreamble, letter} {
		if _, err := p.Run(context.Background(), Job{Preamble: pre, Body: "In use.\n"}); err != nil {
			t.Fatalf("Run = %v", err)
		}
	}
	type counts struct{ zygotes, warm int }
	of := func(pre string) counts {
		p.mu.Lock()
		defer p.mu.Unlock()
		prof := p.profileLocked(pre)
		return counts{len(prof.zygotes.ready) + prof.zygotes.starting, len(prof.warm) + prof.starting}
	}
	testenv.Eventually(t, "both profiles in use: two zygotes and a spare each", func() bool {
		s := p.Stats()
		return of(testPreamble) == counts{2, 1} && of(letter) == counts{2, 1} && s.ZygotesStarting == 0 && s.Warming == 0
	})
	retired := p.Stats().ZygotesRetired

	clock.Advance(idle + time.Second)
	p.sweep()
	testenv.Eventually(t, "the idle profiles retired", func() bool {
		s := p.Stats()
		return of(letter) == counts{0, 0} && of(testPreamble) == counts{1, 1} && s.Warming == 0 && s.ZygotesStarting == 0
	})
	s := p.Stats()
	if got := s.ZygotesRetired - retired; got != 3 {
		t.Errorf("zygotes retired = %d, want 3 (letter's two, A4's spare)", got)
	}
	if s.Retired < 2 {
		t.Errorf("warm processes retired = %d, want at least 2", s.Retired)
	}
	testenv.Eventually(t, "four TeX processes: a zygote pair and its child's pair", func() bool {
		return len(procsUnder(p.cfg.Runner.TempDir)) == 4
	})
	res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "After the retirement.\n"})
	if err != nil {
		t.Fatalf("Run = %v", err)
	}
	if res.Forked == 0 || !strings.Contains(pdfText(t, res.PDF), "After the retirement.") {
		t.Errorf("the render after the retirement: forked %d, text %q", res.Forked, pdfText(t, res.PDF))
	}
	res, err = p.Run(context.Background(), Job{Preamble: letter, Body: "Letter again.\n"})
	if err != nil || !strings.Contains(pdfText(t, res.PDF), "Letter again.") {
		t.Fatalf("a retired profile's render = %v", err)
	}
}

// brokenTeX writes an xelatex that runs the real one until the file it
// returns exists, and then fails as a broken TeX installation does.
func brokenTeX(t *testing.T) (program, marker string) {
	t.Helper()
	testenv.Require(t, "xelatex")
	real, err := exec.LookPath("xelatex")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	marker = filepath.Join(dir, "broken")
	program = filepath.Join(dir, "xelatex")
	script := fmt.Sprintf("#!/bin/sh\nif [ -e %q ]; then echo 'xelatex: fatal: the format file is corrupt' >&2; exit 3; fi\nexec %q \"$@\"\n", marker, real)
	if err := os.WriteFile(program, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return program, marker
}

// TestPoolReadyLive: Ready follows the warm-ups. A pool whose TeX breaks
// after it was ready says why once the warm-ups of its preamble failed
// twice in a row, and is ready again when a later try succeeds.
func TestPoolReadyLive(t *testing.T) {
	program, marker := brokenTeX(t)
	clock := &testenv.Clock{}
	sig := &PoolSignals{}
	sig.Init(t)
	// Warm processes of their own: each replacement starts TeX anew.
	p := newTestPool(t, PoolConfig{Min: 1, Clock: clock, Signals: sig, Preambles: []string{testPreamble},
		Runner: RunnerConfig{Program: program}, Zygote: ZygoteConfig{Off: true}})
	testenv.Eventually(t, "a warm process", func() bool { return p.Stats().Warm == 1 })
	if err := p.Ready(context.Background()); err != nil {
		t.Fatalf("Ready = %v, want nil", err)
	}

	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	victims := idleTeX(p.cfg.Runner.TempDir, "xelatex")
	if len(victims) != 1 {
		t.Fatalf("warm xelatex processes = %v, want one", victims)
	}
	if err := syscall.Kill(victims[0], syscall.SIGKILL); err != nil {
		t.Fatalf("kill xelatex: %v", err)
	}
	for range readyFailures {
		if _, ok := sig.WarmupFailed.Wait(time.Minute); !ok {
			t.Fatal("the warm-ups did not fail")
		}
	}
	err := p.Ready(context.Background())
	if err == nil || !strings.Contains(err.Error(), "2 warm-ups failed in a row") || !strings.Contains(err.Error(), "format file is corrupt") {
		t.Fatalf("Ready after two failed warm-ups = %v, want the failures with TeX's message", err)
	}

	// Mended: the janitor's next try succeeds.
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	clock.Advance(warmRetry)
	p.sweep()
	testenv.Eventually(t, "a successful warm-up", func() bool { return p.Ready(context.Background()) == nil && p.Stats().Warm == 1 })
	res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "Mended.\n"})
	if err != nil || !strings.Contains(pdfText(t, res.PDF), "Mended.") {
		t.Fatalf("Run after mending = %v", err)
	}
}
