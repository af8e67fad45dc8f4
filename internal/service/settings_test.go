package service

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/testenv"
	"github.com/outprint/outprint/internal/tex"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	digestA = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b" // sha256("secret")
	digestB = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")
)

// loadConfig loads a configuration file with text and env as serve does.
func loadConfig(t *testing.T, text string, env ...string) *config.Config {
	t.Helper()
	return testenv.LoadConfig(t, text, env...)
}

// plainConfig is a configuration's values without where they came from.
func plainConfig(c *config.Config) config.Config {
	v := *config.Default()
	v.Listen, v.DataDir, v.Database, v.Store = c.Listen, c.DataDir, c.Database, c.Store
	v.Admission, v.Outline, v.Images, v.Webhooks, v.Jobs, v.Render, v.Pool, v.Shutdown = c.Admission, c.Outline, c.Images, c.Webhooks, c.Jobs, c.Render, c.Pool, c.Shutdown
	v.Admin, v.Worker, v.Gateway, v.Cluster = c.Admin, c.Worker, c.Gateway, c.Cluster
	v.Auth.APIKeys = nil
	return v
}

// TestEffectiveDefaults: what the process uses for a configuration that
// sets nothing is each owning package's Default constant — the values
// README documents — and nothing is a copy of another.
func TestEffectiveDefaults(t *testing.T) {
	t.Parallel()
	e := Effective(loadConfig(t, ""))
	want := config.Config{
		Listen: DefaultListen, DataDir: DefaultDataDir, Database: "sqlite://./outprint-data/outprint.db",
		Admission: config.Admission{Slots: admission.DefaultSlots, QueueDepth: admission.DefaultQueueDepth,
			PerUser: admission.DefaultPerUser, MaxWait: admission.DefaultMaxWait},
		Jobs: config.Jobs{TTL: jobs.DefaultTTL, LeaseTimeout: jobs.DefaultLeaseTimeout,
			MaxQueuedPerTenant: jobs.DefaultMaxQueuedPerTenant, MaxStoredBytesPerTenant: jobs.DefaultMaxStoredBytesPerTenant},
		Worker:   config.Worker{Listen: DefaultWorkerListen},
		Render:   config.Render{Timeout: limits.DefaultRenderTimeout, MaxPages: limits.DefaultMaxPages, MaxPDFBytes: limits.MaxPDFBytes},
		Pool:     config.Pool{Min: tex.DefaultPoolMin, IdleTimeout: tex.DefaultPoolIdleTimeout},
		Shutdown: config.Shutdown{Grace: DefaultGrace},
	}
	if got := plainConfig(e); !reflect.DeepEqual(got, plainConfig(&want)) {
		t.Errorf("Effective(nothing set) = %+v,\nwant %+v", got, want)
	}
	// The figures README and the configuration's documentation give.
	if want.Admission != (config.Admission{Slots: 1, QueueDepth: 4, PerUser: 1, MaxWait: time.Minute}) ||
		want.Pool != (config.Pool{Min: 1, IdleTimeout: 5 * time.Minute}) || want.Shutdown.Grace != 30*time.Second {
		t.Errorf("documented defaults changed: %+v %+v %+v", want.Admission, want.Pool, want.Shutdown)
	}
}

// TestEffectiveZeros: a zero the operator sets is kept where zero is a
// value (no queue, no warm process, no grace), and the package's own
// default where it is not.
func TestEffectiveZeros(t *testing.T) {
	t.Parallel()
	c := loadConfig(t, "admission: {queueDepth: 0}\npool: {min: 0}\nshutdown: {grace: 0}\n")
	e := Effective(c)
	if e.Admission.QueueDepth != 0 || e.Pool.Min != 0 || e.Shutdown.Grace != 0 {
		t.Errorf("Effective(zeros set) = queue %d, pool.min %d, grace %s; want 0, 0, 0", e.Admission.QueueDepth, e.Pool.Min, e.Shutdown.Grace)
	}
	if ac := admissionConfig(c); ac.QueueDepth != 0 {
		t.Errorf("admissionConfig(queueDepth: 0).QueueDepth = %d, want 0", ac.QueueDepth)
	}
	if pc := poolConfig(c).WithDefaults(); pc.Min >= 0 {
		t.Errorf("poolConfig(min: 0).Min = %d, want negative: none", pc.Min)
	}
	if d := databaseURL(loadConfig(t, "dataDir: /var/lib/outprint/\n")); d != "sqlite:///var/lib/outprint/outprint.db" {
		t.Errorf("databaseURL(dataDir /var/lib/outprint/) = %s, want the SQLite file in it", d)
	}
}

func TestDatabaseDriver(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ db, driver, dsn string }{
		{"", "sqlite", "./outprint-data/outprint.db"},
		{"sqlite:///var/lib/outprint/outprint.db", "sqlite", "/var/lib/outprint/outprint.db"},
		{"postgres://u@h:5432/db?sslmode=disable", "postgres", "postgres://u@h:5432/db?sslmode=disable"},
		{"postgresql://h/db", "postgres", "postgresql://h/db"},
	} {
		c := &config.Config{Database: tc.db}
		if driver, dsn := databaseDriver(c); driver != tc.driver || dsn != tc.dsn {
			t.Errorf("databaseDriver(%s) = %s, %s, want %s, %s", tc.db, driver, dsn, tc.driver, tc.dsn)
		}
	}
}

func TestCheckListen(t *testing.T) {
	t.Parallel()
	keys := "auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: " + digestA + "}\n"
	for _, tc := range []struct {
		file   string
		env    []string
		wantOK bool
	}{
		{"", nil, true},
		{"listen: localhost:8080", nil, true},
		{"listen: 127.0.0.2:8080", nil, true},
		{"listen: '[::1]:8080'", nil, true},
		{"listen: 0.0.0.0:8080", nil, false},
		{"listen: :8080", nil, false},
		{"listen: 192.0.2.10:8080", nil, false},
		{"listen: outprint.example.com:8080", nil, false},
		{"", []string{"OUTPRINT_LISTEN=0.0.0.0:8080"}, false},
		{keys + "listen: 0.0.0.0:8080", nil, true},
		{"outline: {url: https://wiki.example.com}\nlisten: 0.0.0.0:8080", nil, true},
		{"", []string{"OUTPRINT_OUTLINE_URL=https://wiki.example.com", "OUTPRINT_LISTEN=:80"}, true},
	} {
		err := checkListen(loadConfig(t, tc.file, tc.env...))
		if (err == nil) != tc.wantOK {
			t.Errorf("checkListen() for %q %v = %v, want ok %v", tc.file, tc.env, err, tc.wantOK)
		}
	}
	want := "listen 0.0.0.0:9000 (from OUTPRINT_LISTEN) is not a loopback address, and with no API keys (auth.apiKeys) " +
		"and no Outline (outline.url) configured anyone who reaches it could render anonymously: set listen " +
		"(OUTPRINT_LISTEN) to a loopback address such as 127.0.0.1:9000, or configure API keys or Outline"
	if err := checkListen(loadConfig(t, "", "OUTPRINT_LISTEN=0.0.0.0:9000")); err == nil || err.Error() != want {
		t.Errorf("checkListen() = %v, want %q", err, want)
	}
	hand := &config.Config{Listen: "nonsense"}
	if err := checkListen(hand); err == nil || err.Error() != `listen "nonsense" is not host:port` {
		t.Errorf("checkListen() on a hand-made Config = %v, want it to say the address is not host:port", err)
	}
}

// What `outprint config check` prints: every key with its effective value
// (the packages' defaults for what the file leaves out) and where a given
// one came from; the golden file shows the whole layout (go test -update
// rewrites it).
func TestEffectiveGolden(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "outprint.yaml")
	if err := os.WriteFile(path, []byte(`# a deployment
listen: 0.0.0.0:8080
database: postgres://outprint:hunter2@db:5432/outprint?sslmode=disable
admission:
  slots: 2
  maxWait: 90s
outline:
  url: https://wiki.example.com
images:
  allowHosts: [images.example.com, '*.cdn.example.net']
auth:
  apiKeys:
    - {user: alice, tenant: acme, sha256: `+digestA+`}
    - {user: bob, tenant: beta, sha256: `+digestB+`}
render:
  maxPdfBytes: 20MiB
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, []string{"OUTPRINT_ADMISSION_QUEUE_DEPTH=0", "OUTPRINT_POOL_MAX=4", "OUTPRINT_CONFIG=" + path})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(Effective(c).Effective(), path, "outprint.yaml")
	golden := filepath.Join("testdata", "effective.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("Effective() =\n%s\nwant (%s)\n%s", got, golden, want)
	}
	for _, secret := range []string{"hunter2", digestA, digestB} {
		if strings.Contains(got, secret) {
			t.Errorf("Effective() shows %q, want it hidden", secret)
		}
	}
}

// What config check prints loads back to the same effective
// configuration (API keys aside, whose digests it shortens).
func TestEffectiveRoundTrip(t *testing.T) {
	c, err := config.Load("", []string{
		"OUTPRINT_LISTEN=127.0.0.1:9999", "OUTPRINT_DATA_DIR=/srv/outprint", "OUTPRINT_ADMISSION_SLOTS=3",
		"OUTPRINT_ADMISSION_MAX_WAIT=1m30s", "OUTPRINT_IMAGES_ALLOW_HOSTS=a.example.com,*.b.example.com",
		"OUTPRINT_OUTLINE_URL=http://outline:3000", "OUTPRINT_TIMEOUT=45s", "OUTPRINT_MAX_PAGES=80",
		"OUTPRINT_MAX_PDF_BYTES=1234567", "OUTPRINT_POOL_MIN=2", "OUTPRINT_POOL_MAX=3",
		"OUTPRINT_POOL_IDLE_TIMEOUT=1500ms", "OUTPRINT_SHUTDOWN_GRACE=0", "OUTPRINT_JOBS_TTL=2h",
	})
	if err != nil {
		t.Fatal(err)
	}
	printed := Effective(c).Effective()
	again := loadConfig(t, printed)
	if !reflect.DeepEqual(plainConfig(Effective(again)), plainConfig(Effective(c))) {
		t.Errorf("Load(Effective()) = %+v, want %+v", plainConfig(Effective(again)), plainConfig(Effective(c)))
	}
	d := config.Default()
	again = loadConfig(t, Effective(d).Effective())
	if !reflect.DeepEqual(plainConfig(Effective(again)), plainConfig(Effective(d))) {
		t.Errorf("Load(Effective(defaults)) = %+v, want the defaults %+v", plainConfig(Effective(again)), plainConfig(Effective(d)))
	}
}
