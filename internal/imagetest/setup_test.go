package imagetest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/testenv"
)

// moduleRoot is the repository root relative to this package.
const moduleRoot = "../.."

// image is the name this test process builds the image as: a name of its
// own, so that tests of two clones on one machine never run each other's
// image (TestCompose points compose.yaml's `image: outprint:local` at it).
// TestMain removes the name at the end; the layers stay cached under
// cacheImage.
var image = "localhost/outprint-imagetest:" + uniqueName("run")

// cacheImage names the last image built here, only to keep its layers:
// removing an image's last name removes the intermediate images of its
// build too, which are podman's layer cache, and every run would then
// install TeX and LibreOffice again (some 6 minutes with the packages
// downloaded, 18 without). No test runs it.
const cacheImage = "localhost/outprint-imagetest:cache"

func TestMain(m *testing.M) {
	code := m.Run()
	if bundle != nil {
		bundle.keepLayers()
	}
	os.Exit(code)
}

// keepLayers moves cacheImage to this run's image and removes this run's
// name, then the image cacheImage named before, if another: that removes
// only what no newer build shares with it (its binary's layer). Best
// effort: a failure costs the next run its cache, not its result.
func (b *testBundle) keepLayers() {
	old, _ := b.try("image", "inspect", "--format", "{{.Id}}", cacheImage)
	if _, err := b.try("tag", image, cacheImage); err != nil {
		fmt.Println("imagetest: tag", image, "as", cacheImage+":", err)
	}
	if _, err := b.try("rmi", image); err != nil {
		fmt.Println("imagetest: remove", image+":", err)
	}
	cur, _ := b.try("image", "inspect", "--format", "{{.Id}}", cacheImage)
	if old != "" && old != cur {
		if _, err := b.try("rmi", old); err != nil {
			fmt.Println("imagetest: remove the previous cache image", old+":", err)
		}
	}
}

// testBundle is what every test of the package shares: the podman
// environment of scripts/containers.sh and the image, built once.
type testBundle struct {
	root string // the repository root, absolute
	// env is the environment of every podman and compose command: this
	// process's plus CONTAINERS_CONF, CONTAINERS_STORAGE_CONF and TMPDIR.
	env        []string
	compose    string // docker compose's binary
	gomodcache string // the host's Go module cache, lent to the build
	npmcache   string // the host's npm cache (the emoji package), lent too
	buildTime  time.Duration
	buildLog   string
}

var (
	bundleOnce sync.Once
	bundle     *testBundle
	bundleErr  error
)

// setup returns the shared bundle, preparing the machine (scripts/
// containers.sh) and building the image the first time. Without podman or
// root it fails under CI and skips elsewhere.
func setup(t *testing.T) *testBundle {
	t.Helper()
	testenv.Require(t, "podman", "runc", "debootstrap", "pdfinfo", "pdftotext", "pdffonts", "qpdf")
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the image tests run podman as root")
	}
	bundleOnce.Do(func() { bundle, bundleErr = prepare() })
	if bundleErr != nil {
		t.Fatal(bundleErr)
	}
	return bundle
}

// prepare runs scripts/containers.sh and builds the image.
func prepare() (*testBundle, error) {
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		return nil, err
	}
	b := &testBundle{root: root, env: os.Environ()}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "containers.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/containers.sh: %v\n%s", err, lastLines(stderr.String(), 40))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k {
		case "OUTPRINT_COMPOSE":
			b.compose = v
		case "OUTPRINT_GOMODCACHE":
			b.gomodcache = v
		case "OUTPRINT_NPMCACHE":
			b.npmcache = v
		default:
			b.env = append(b.env, k+"="+v)
		}
	}
	if b.compose == "" || b.gomodcache == "" {
		return nil, fmt.Errorf("scripts/containers.sh printed no compose or module cache:\n%s", out)
	}
	return b, b.build()
}

// build builds the image from the Dockerfile as written. Only the
// stand-ins of its FROM images are local; the host's Go module cache and
// npm cache are lent as overlays (writes are thrown away), so `go mod
// download` and the emoji stage's `npm pack` need no network (HTTPS from
// inside a container would not pass this machine's proxy either). Layers are cached in podman's storage, so a build after a
// source change redoes only the Go build and the last layer.
func (b *testBundle) build() error {
	f, err := os.CreateTemp("", "outprint-image-build-*.log")
	if err != nil {
		return err
	}
	// podman writes the log through its own descriptor: our Close has
	// nothing to report about it.
	defer func() { _ = f.Close() }()
	b.buildLog = f.Name()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	start := time.Now()
	args := []string{"build", "--format", "docker", "--pull=never", "--jobs", "2",
		"-v", b.gomodcache + ":/go/pkg/mod:O"}
	if b.npmcache != "" {
		args = append(args, "-v", b.npmcache+":/root/.npm:O")
	}
	cmd := b.podman(ctx, append(args, "-t", image, b.root)...)
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	b.buildTime = time.Since(start)
	if err != nil {
		log, _ := os.ReadFile(f.Name())
		return fmt.Errorf("podman build: %v (log %s)\n%s", err, f.Name(), lastLines(string(log), 60))
	}
	return nil
}

// podman returns a podman command in the tests' environment.
func (b *testBundle) podman(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "podman", args...)
	cmd.Env = b.env
	return cmd
}

// run runs podman and returns its standard output, trimmed; an error
// fails the test with its output.
func (b *testBundle) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := b.try(args...)
	if err != nil {
		t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// try runs podman with a timeout and returns its standard output, trimmed,
// or an error with its standard error.
func (b *testBundle) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := b.podman(ctx, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return strings.TrimSpace(string(out)), fmt.Errorf("%v: %s", err, lastLines(stderr.String(), 20))
	}
	return strings.TrimSpace(string(out)), nil
}

// apiKey returns a new random API key and an outprint.yaml that accepts it
// (auth.apiKeys takes the key's SHA-256).
func apiKey(t *testing.T) (key, config string) {
	t.Helper()
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	key = "imagetest-" + hex.EncodeToString(raw)
	sum := sha256.Sum256([]byte(key))
	config = fmt.Sprintf("auth:\n  apiKeys:\n    - {user: imagetest, tenant: imagetest, sha256: %s}\n", hex.EncodeToString(sum[:]))
	return key, config
}

// uniqueName returns a container or project name no other run uses.
func uniqueName(prefix string) string {
	raw := make([]byte, 4)
	rand.Read(raw)
	return fmt.Sprintf("%s-%d-%s", prefix, os.Getpid(), hex.EncodeToString(raw))
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
