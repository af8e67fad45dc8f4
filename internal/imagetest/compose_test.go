package imagetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// composeRun is compose.yaml's topology up under docker compose.
type composeRun struct {
	b       *testBundle
	project string
	files   []string // -f arguments
	env     []string // compose's environment: podman's socket, the secrets
}

// compose runs docker compose on the project and returns its output.
func (r *composeRun) compose(ctx context.Context, args ...string) (string, error) {
	full := []string{"-p", r.project}
	for _, f := range r.files {
		full = append(full, "-f", f)
	}
	cmd := exec.CommandContext(ctx, r.b.compose, append(full, args...)...)
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// containers returns the ids of a service's running containers.
func (r *composeRun) containers(t *testing.T, service string) []string {
	t.Helper()
	out := r.b.run(t, "ps", "-q", "--no-trunc",
		"--filter", "label=com.docker.compose.project="+r.project,
		"--filter", "label=com.docker.compose.service="+service)
	ids := strings.Fields(out)
	sort.Strings(ids)
	return ids
}

// startPodmanService serves podman's Docker API on a socket of its own
// for the test's life, and returns DOCKER_HOST.
func startPodmanService(t *testing.T, b *testBundle) string {
	t.Helper()
	sock := filepath.Join("/run/outprint-podman", uniqueName("api")+".sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := b.podman(context.Background(), "system", "service", "--time=0", "unix://"+sock)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	// The service ends on our Interrupt, so how it exited says nothing;
	// an early end fails the test below with its log. Signal and Kill
	// fail only on a service that is gone already (done then fires), and
	// the socket may be gone with it.
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = os.Remove(sock)
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		if c, err := net.Dial("unix", sock); err == nil {
			_ = c.Close() // only a probe that the service listens
			return "unix://" + sock
		}
		select {
		case <-done:
			t.Fatalf("podman system service exited: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("podman system service does not listen on %s: %s", sock, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tickHealthchecks runs the project's healthchecks once a second, as
// Docker's daemon does (podman leaves that to systemd timers, which this
// machine has not), until ctx ends.
func tickHealthchecks(ctx context.Context, b *testBundle, project string, wg *sync.WaitGroup) {
	defer wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		out, err := b.podman(ctx, "ps", "-q", "--filter", "label=com.docker.compose.project="+project,
			"--format", "{{.ID}} {{.Status}}").Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			id, status, _ := strings.Cut(line, " ")
			// Only containers with a healthcheck show a health in their
			// status: "Up 3 seconds (starting)".
			if id != "" && strings.Contains(status, "(") {
				// A failing check is what podman records as the
				// container's health, which the test reads.
				_ = b.podman(ctx, "healthcheck", "run", id).Run()
			}
		}
	}
}

// TestCompose runs compose.yaml as written (with the stand-in images, an
// outprint.yaml with an API key, and the gateway published on a free
// loopback port) and checks the topology from outside and inside: two
// workers behind the gateway with SPEC's limits read from their cgroup
// files, a read-only root and a 256 MiB tmpfs; a render of the corpus's
// handbook, a job and its preview through the gateway; a render that needs
// more memory than a worker has ends as 413 `resource` and no container
// dies.
func TestCompose(t *testing.T) {
	b := setup(t)
	host := startPodmanService(t, b)
	dir := t.TempDir()
	key, cfg := apiKey(t)
	cfgPath := filepath.Join(dir, "outprint.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// compose.yaml reads outprint.yaml beside it, the test's is elsewhere;
	// and outprint's services run the image this test built.
	override := filepath.Join(dir, "compose.test.yaml")
	var o strings.Builder
	fmt.Fprintf(&o, "configs:\n  outprint:\n    file: %s\nservices:\n", cfgPath)
	for _, svc := range []string{"migrate", "gateway", "worker"} {
		fmt.Fprintf(&o, "  %s:\n    image: %s\n", svc, image)
	}
	if err := os.WriteFile(override, []byte(o.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	docker := filepath.Join(dir, "docker")
	if err := os.MkdirAll(docker, 0o700); err != nil {
		t.Fatal(err)
	}
	r := &composeRun{
		b:       b,
		project: uniqueName("outprint-imagetest"),
		files:   []string{filepath.Join(b.root, "compose.yaml"), override},
		env: append(os.Environ(),
			"DOCKER_HOST="+host,
			"DOCKER_CONFIG="+docker,
			"OUTPRINT_CLUSTER_SECRET=imagetest-cluster-secret-0123456789",
			"AWS_SECRET_ACCESS_KEY=imagetest-s3-secret-0123456789",
			"GATEWAY_PORT=127.0.0.1:",
		),
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go tickHealthchecks(ctx, b, r.project, &wg)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := r.compose(context.Background(), "logs", "--no-color", "--tail", "40")
			t.Logf("compose logs:\n%s", logs)
		}
		dctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if out, err := r.compose(dctx, "down", "--volumes", "--timeout", "10"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
		stop()
		wg.Wait()
	})

	uctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	if out, err := r.compose(uctx, "up", "--detach", "--no-build", "--pull", "never"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	// compose up waited for the database's health (depends_on:
	// service_healthy), and nothing reads a health after it: the ticks
	// stop here. Each cost a podman ps and a podman healthcheck run (the
	// image tests started 104 podman processes with them to the end, 57
	// without).
	stop()
	wg.Wait()
	port, err := r.compose(uctx, "port", "gateway", "8080")
	if err != nil {
		t.Fatalf("compose port gateway 8080: %v\n%s", err, port)
	}
	base := "http://" + port
	waitReady(t, base, 5*time.Minute, nil)
	workers := r.containers(t, "worker")
	if len(workers) != 2 {
		t.Fatalf("worker containers running: %v, want 2 replicas", workers)
	}
	waitWorkersReady(t, base, key, 2, 5*time.Minute)
	t.Logf("compose up to two ready workers: %s", time.Since(start).Round(time.Second))

	t.Run("limits", func(t *testing.T) {
		for _, id := range workers {
			checkLimits(t, b, id, limitsWant{memory: 1 << 30, cpus: 1, pids: 512, tmpfs: 256 << 20})
		}
		for _, id := range r.containers(t, "gateway") {
			checkLimits(t, b, id, limitsWant{memory: 512 << 20, cpus: 1, pids: 128, tmpfs: 256 << 20})
		}
	})

	c := newClient(base, key)
	t.Run("render", func(t *testing.T) { renderHandbook(t, c) })
	// The gateway sends the form to a worker, as it does renders.
	t.Run("form", func(t *testing.T) { fillForm(t, c) })
	t.Run("office", func(t *testing.T) { convertOffice(t, c) })
	t.Run("job", func(t *testing.T) {
		id := runJob(t, c, "A job on the cluster")
		preview(t, c, id)
	})
	t.Run("memory", func(t *testing.T) { tooMuchMemory(t, r, c, workers) })
	t.Run("scratch", func(t *testing.T) {
		for _, id := range append(r.containers(t, "gateway"), workers...) {
			noScratchInTmp(t, b, id)
		}
	})
}

// noScratchInTmp fails when anything is left in /tmp of container id after
// the renders, forms, conversions and previews: scratch files belong in
// the data folder. Sockets are no scratch: podman gives a read-only
// container a writable /tmp, and LibreOffice puts the UNO sockets of its
// running processes there where /tmp is writable (in the data folder
// where it is not, as under Docker or in TestImageServe).
func noScratchInTmp(t *testing.T, b *testBundle, id string) {
	t.Helper()
	if out := b.run(t, "exec", id, "find", "/tmp", "/var/tmp", "-mindepth", "1", "-maxdepth", "2", "!", "-type", "s"); out != "" {
		t.Errorf("%.12s: files in /tmp or /var/tmp, want none:\n%s", id, out)
	}
}

// waitWorkersReady waits until the gateway's /metrics show n workers ready.
func waitWorkersReady(t *testing.T, base, key string, n int, limit time.Duration) {
	t.Helper()
	c := newClient(base, key)
	ready := regexp.MustCompile(`(?m)^outprint_gateway_worker_ready\{worker="[^"]+"\} 1$`)
	var last string
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(time.Second) {
		status, _, body := c.do(t, http.MethodGet, "/metrics", "", nil)
		last = string(body)
		if status == http.StatusOK && len(ready.FindAllString(last, -1)) >= n {
			return
		}
	}
	t.Fatalf("the gateway does not see %d ready workers after %s:\n%s", n, limit, grepLines(last, "outprint_gateway_worker"))
}

// limitsWant is a container's limits as compose.yaml sets them.
type limitsWant struct {
	memory, pids, tmpfs int64
	cpus                float64
}

// limitsScript prints a container's limits from inside it, from cgroup v2
// or v1 files, and its data folder's tmpfs size and /tmp's writability.
const limitsScript = `
cg=/sys/fs/cgroup
if [ -f $cg/memory.max ]; then
  echo "memory $(cat $cg/memory.max)"
  echo "cpu $(cat $cg/cpu.max)"
  echo "pids $(cat $cg/pids.max)"
else
  echo "memory $(cat $cg/memory/memory.limit_in_bytes)"
  echo "cpu $(cat $cg/cpu/cpu.cfs_quota_us) $(cat $cg/cpu/cpu.cfs_period_us)"
  echo "pids $(cat $cg/pids/pids.max)"
fi
echo "tmpfs $(df -B1 --output=size /var/lib/outprint | tail -n1)"
echo "rootfs $(grep -c ' / [a-z0-9]* ro[,$ ]' /proc/mounts)"
if : > /tmp/.outprint-imagetest 2>/dev/null; then
  rm -f /tmp/.outprint-imagetest
  if grep -q ' /tmp tmpfs ' /proc/mounts; then echo "tmp tmpfs"; else echo "tmp writable"; fi
else
  echo "tmp read-only"
fi
`

// checkLimits reads the limits inside container id and compares them with
// want.
func checkLimits(t *testing.T, b *testBundle, id string, want limitsWant) {
	t.Helper()
	out := b.run(t, "exec", id, "bash", "-c", limitsScript)
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, " ")
		got[k] = v
	}
	t.Logf("%.12s: %s", id, strings.ReplaceAll(out, "\n", "; "))
	var quota, period float64
	if n, _ := fmt.Sscanf(got["cpu"], "%g %g", &quota, &period); n != 2 || period == 0 || quota/period != want.cpus {
		t.Errorf("%.12s: cpu %q, want %g CPU", id, got["cpu"], want.cpus)
	}
	for k, w := range map[string]int64{"memory": want.memory, "pids": want.pids, "tmpfs": want.tmpfs} {
		if got[k] != fmt.Sprint(w) {
			t.Errorf("%.12s: %s = %q, want %d", id, k, got[k], w)
		}
	}
	if got["rootfs"] != "1" {
		t.Errorf("%.12s: the root file system is not mounted read-only", id)
	}
	// Docker leaves /tmp of a read-only container read-only; podman's
	// Docker API mounts a tmpfs there (its compat handler always asks for
	// one). noScratchInTmp checks that outprint writes nothing to it; the
	// serve test runs with /tmp read-only.
	if got["tmp"] != "read-only" && got["tmp"] != "tmpfs" {
		t.Errorf("%.12s: /tmp is %s, want read-only (compose.yaml has read_only: true)", id, got["tmp"])
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// hogSVG passes every check of an image (36 million pixels) but its
// filter keeps eight full-size surfaces of 144 MB at once: rsvg-convert
// needs about 960 MB to draw it, within its own address-space limit
// (1 GiB) but more than a worker container has beside the worker and its
// TeX processes.
func hogSVG() string {
	var b strings.Builder
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" width="6000" height="6000"><filter id="f" x="0" y="0" width="1" height="1">`)
	for i := range 8 {
		fmt.Fprintf(&b, `<feFlood flood-color="#%02x%02x%02x" flood-opacity="0.5" result="r%d"/>`, i, i, i, i)
	}
	b.WriteString(`<feMerge>`)
	for i := range 8 {
		fmt.Fprintf(&b, `<feMergeNode in="r%d"/>`, i)
	}
	b.WriteString(`</feMerge></filter><rect width="6000" height="6000" filter="url(#f)"/></svg>`)
	return b.String()
}

// tooMuchMemory renders a document whose SVG needs more memory than a
// worker container has: the answer is 413 with the error `resource`, every
// container keeps running (none restarted), and the next render succeeds.
func tooMuchMemory(t *testing.T, r *composeRun, c *client, workers []string) {
	t.Helper()
	started := func() map[string]string {
		out := map[string]string{}
		for _, id := range append(r.containers(t, "gateway"), workers...) {
			out[id] = r.b.run(t, "inspect", "--format", "{{.State.Status}} {{.State.StartedAt}} {{.RestartCount}}", id)
		}
		return out
	}
	before := started()
	dir := t.TempDir()
	doc := filepath.Join(dir, "hog.md")
	svg := filepath.Join(dir, "hog.svg")
	if err := os.WriteFile(doc, []byte("# Too much\n\n![a filter that needs a gigabyte](hog.svg)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(svg, []byte(hogSVG()), 0o644); err != nil {
		t.Fatal(err)
	}
	ct, body := multipartBody(t, part{"document", "hog.md", doc}, part{"asset", "hog.svg", svg})
	status, _, answer := c.do(t, http.MethodPost, "/v1/render", ct, body)
	t.Logf("a render over the worker's memory: %d %s", status, answer)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(answer), `"code":"resource"`) {
		t.Errorf("POST /v1/render of a document over the worker's memory = %d %s, want 413 with code resource", status, answer)
	}
	if after := started(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("containers before the render %v, after %v: want none stopped or restarted", before, after)
	}
	// The workers still render.
	doc2, _ := json.Marshal(map[string]string{"markdown": "# After the hog\n\nStill rendering."})
	for i := range 2 {
		if status, _, answer := c.do(t, http.MethodPost, "/v1/render", "application/json", doc2); status != http.StatusOK {
			t.Errorf("render %d after the hog = %d %.300s, want 200", i+1, status, answer)
		}
	}
}
