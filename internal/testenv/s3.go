package testenv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// S3 access keys of the test server; tests pass them to outprint as
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
const (
	S3AccessKey = "outprint-test"
	S3SecretKey = "outprint-test-secret-key-0123456789"
)

// S3Server is a real SeaweedFS server (master, volume, filer and its S3
// gateway in one `weed server` process) on loopback ports, its data in a
// temporary folder. Stop and Start stop it and start it again on the same
// ports and data, for tests of a store that goes away.
type S3Server struct {
	// Endpoint is the S3 gateway's base URL, e.g. http://127.0.0.1:41234.
	Endpoint string

	t    testing.TB
	bin  string
	args []string
	log  *os.File

	mu  sync.Mutex
	cmd *exec.Cmd
}

// weedBinary returns the path of SeaweedFS's weed: SEAWEEDFS_WEED, weed on
// PATH, or the copy scripts/seaweedfs.sh builds and caches (it is built
// here when missing, which takes minutes once).
func weedBinary(t testing.TB, moduleRoot string) string {
	t.Helper()
	if p := os.Getenv("SEAWEEDFS_WEED"); p != "" {
		return p
	}
	if p, err := exec.LookPath("weed"); err == nil {
		return p
	}
	out, err := exec.Command(filepath.Join(moduleRoot, "scripts", "seaweedfs.sh")).Output()
	p := strings.TrimSpace(string(out))
	if err != nil || p == "" {
		Missing(t, fmt.Sprintf("SeaweedFS weed (scripts/seaweedfs.sh): %v", err))
	}
	return p
}

// StartS3 starts a SeaweedFS S3 server for the test and stops it when the
// test ends. moduleRoot is the repository root relative to the test's
// package (for scripts/seaweedfs.sh). A missing weed fails the test under
// CI and skips it elsewhere.
func StartS3(t testing.TB, moduleRoot string) *S3Server {
	t.Helper()
	bin := weedBinary(t, moduleRoot)
	dir := t.TempDir()
	conf := filepath.Join(dir, "s3.json")
	cfg := fmt.Sprintf(`{"identities":[{"name":"outprint","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","List","Tagging","Write"]}]}`,
		S3AccessKey, S3SecretKey)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 4)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o750); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		t.Fatal(err)
	}
	s := &S3Server{
		Endpoint: fmt.Sprintf("http://127.0.0.1:%d", ports[3]),
		t:        t,
		bin:      bin,
		log:      log,
		args: []string{"server",
			"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
			fmt.Sprintf("-master.port=%d", ports[0]), fmt.Sprintf("-master.port.grpc=%d", ports[0]+1),
			fmt.Sprintf("-volume.port=%d", ports[1]), fmt.Sprintf("-volume.port.grpc=%d", ports[1]+1),
			fmt.Sprintf("-filer.port=%d", ports[2]), fmt.Sprintf("-filer.port.grpc=%d", ports[2]+1),
			fmt.Sprintf("-s3.port=%d", ports[3]), fmt.Sprintf("-s3.port.grpc=%d", ports[3]+1),
			"-filer.localSocket=" + filepath.Join(dir, "filer.sock"),
			"-filer", "-s3", "-s3.config=" + conf,
			"-master.volumeSizeLimitMB=64", "-volume.max=20", "-master.telemetry=false",
		},
	}
	t.Cleanup(func() {
		s.Stop()
		_ = log.Close()
		if t.Failed() {
			if b, err := os.ReadFile(log.Name()); err == nil {
				t.Logf("weed log (last 4 KiB):\n%s", tail(b, 4096))
			}
		}
	})
	s.Start()
	return s
}

// Start starts the server (again) and waits until its S3 gateway answers.
func (s *S3Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start weed: %v", err)
	}
	s.cmd = cmd
	// Ready means the gateway answers a request with an S3 answer; the
	// master, volume and filer behind it come up in a few seconds.
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode < 500 {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("weed S3 gateway at %s did not come up: %v", s.Endpoint, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop kills the server's process group and waits for it.
func (s *S3Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// freePorts returns n loopback ports that are free, each with the next
// port free too (weed's gRPC ports are given as port+1).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	// The ports come from below the kernel's ephemeral range: a port
	// taken from inside it is free when asked but may be any outgoing
	// connection's by the time weed binds it and its gRPC neighbour
	// (CI saw "bind: address already in use" on port+1 under load).
	low := ephemeralLow()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatal("no free pair of ports below the ephemeral range")
		}
		p := 10000 + rand.IntN(low-10002)
		if slices.Contains(ports, p) || slices.Contains(ports, p+1) || slices.Contains(ports, p-1) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1))
		_ = l.Close()
		if err != nil {
			continue
		}
		_ = l2.Close()
		ports = append(ports, p)
	}
	return ports
}

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < 12000 {
		return 32768
	}
	return low
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return b
}
