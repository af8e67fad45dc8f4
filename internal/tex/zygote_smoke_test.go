package tex

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestZygoteSmoke(t *testing.T) {
	p := newTestPool(t, PoolConfig{Min: 1, Preambles: []string{testPreamble}, Runner: RunnerConfig{Timeout: 8 * time.Second}})
	waitFor(t, "zygote", func() bool { return p.Stats().Zygotes > 0 || p.Stats().ZygoteFailures > 0 })
	t.Logf("stats %+v", p.Stats())
	for i := 0; i < 3; i++ {
		waitFor(t, "slot", func() bool { return p.Stats().Warm > 0 })
		go func() {
			time.Sleep(3 * time.Second)
			out, _ := exec.Command("sh", "-c", "ps -eo pid,ppid,pgid,stat,wchan:20,args | grep -E 'xetex|xelatex|xdvi|cat' | grep -v grep; for d in "+p.cfg.Runner.TempDir+"/outprint-warm-*; do echo $d; ls $d; tail -5 $d/main.log; done").CombinedOutput()
			os.Stderr.Write(out)
		}()
		res, err := p.Run(context.Background(), Job{Preamble: testPreamble, Body: "Hello \\the\\time\\ \\the\\year\n"})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		t.Logf("text %q cpu %v warm %v engine %v", pdfText(t, res.PDF), res.CPU, res.WarmCPU, res.Engine)
	}
	t.Logf("stats %+v", p.Stats())
}
