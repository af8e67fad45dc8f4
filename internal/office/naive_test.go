package office

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/childproc"
	"github.com/outprint/outprint/internal/testenv"
)

// naiveConvert converts files the way a user scripts it by hand:
// `soffice --headless --convert-to pdf` started for the batch, with a
// fresh profile. It returns the PDFs by input name; a file LibreOffice could not convert
// is missing.
func naiveConvert(t *testing.T, files map[string][]byte) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	in, out, profile := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "profile")
	for _, d := range []string{in, out, filepath.Join(profile, "user")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"-n", strconv.Itoa(childproc.Nice), "soffice", "--headless", "--norestore",
		"-env:UserInstallation=" + fileURL(profile), "--convert-to", "pdf", "--outdir", out}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(in, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, filepath.Join(in, name))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*testenv.WaitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nice", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+profile, "OSL_SOCKET_PATH="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice --convert-to pdf: %v\n%s", err, b)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH: nothing left, the usual case
	pdfs := map[string][]byte{}
	for name := range files {
		b, err := os.ReadFile(filepath.Join(out, strings.TrimSuffix(name, filepath.Ext(name))+".pdf"))
		if err == nil {
			pdfs[name] = b
		}
	}
	return pdfs
}
