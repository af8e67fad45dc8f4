package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outprint/outprint/internal/limits"
)

// writeFile writes a configuration file into a fresh folder and returns
// its path.
func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outprint.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// plain drops the origins, so that Configs compare by their values.
func plain(c *Config) Config {
	v := *c
	v.origins = nil
	return v
}

// errLines splits a joined error into its messages.
func errLines(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

const (
	digestA = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b" // sha256("secret")
	digestB = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")
)

// TestDefaults: a configuration without file or environment leaves every
// setting unset (zero), so each package keeps its own default; Set tells
// the settings whose zero is a value apart.
func TestDefaults(t *testing.T) {
	t.Parallel()
	c, err := Load("", nil)
	if err != nil {
		t.Fatalf(`Load("", nil) = %v`, err)
	}
	if got := plain(c); !reflect.DeepEqual(got, Config{}) {
		t.Errorf(`Load("", nil) = %+v, want every setting unset`, got)
	}
	if got := plain(Default()); !reflect.DeepEqual(got, Config{}) {
		t.Errorf("Default() = %+v, want every setting unset", got)
	}
	if !c.Anonymous() {
		t.Error("defaults: Anonymous() = false, want true")
	}
	if got := c.Render.Limits(); got != limits.DefaultRender() {
		t.Errorf("Render.Limits() = %+v, want limits.DefaultRender() %+v", got, limits.DefaultRender())
	}
	for _, key := range []string{"admission.queueDepth", "pool.min", "shutdown.grace"} {
		if c.Set(key) {
			t.Errorf("Set(%s) without file or environment = true", key)
		}
	}
	z, err := Load(writeFile(t, "admission: {queueDepth: 0}\npool: {min: 0}\n"), []string{"OUTPRINT_SHUTDOWN_GRACE=0"})
	if err != nil {
		t.Fatal(err)
	}
	for key, origin := range map[string]string{"admission.queueDepth": ":1", "pool.min": ":2", "shutdown.grace": "OUTPRINT_SHUTDOWN_GRACE"} {
		if !z.Set(key) || !strings.HasSuffix(z.Origin(key), origin) {
			t.Errorf("Set(%s) = %v from %q, want true from …%s", key, z.Set(key), z.Origin(key), origin)
		}
	}
}

// Every key, from the file.
func TestFileKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml string
		got  func(c *Config) any
		want any
	}{
		{"listen: 0.0.0.0:9000", func(c *Config) any { return c.Listen }, "0.0.0.0:9000"},
		{"listen: '[::1]:0'", func(c *Config) any { return c.Listen }, "[::1]:0"},
		{"listen: localhost:8080", func(c *Config) any { return c.Listen }, "localhost:8080"},
		{"listen: :8080", func(c *Config) any { return c.Listen }, ":8080"},
		{"dataDir: /var/lib/outprint", func(c *Config) any { return c.DataDir }, "/var/lib/outprint"},
		{"database: sqlite:///tmp/x.db", func(c *Config) any { return c.Database }, "sqlite:///tmp/x.db"},
		{"database: postgres://outprint@db:5432/outprint", func(c *Config) any { return c.Database }, "postgres://outprint@db:5432/outprint"},
		{"database: postgresql://db/outprint", func(c *Config) any { return c.Database }, "postgresql://db/outprint"},
		{"jobs: {leaseTimeout: 40s}", func(c *Config) any { return c.Jobs.LeaseTimeout }, 40 * time.Second},
		{"gateway: {workers: ['http://worker:8090/', 'https://10.0.0.7:443']}", func(c *Config) any { return c.Gateway.Workers },
			[]string{"http://worker:8090", "https://10.0.0.7:443"}},
		{"cluster: {secret: 0123456789abcdef}", func(c *Config) any { return c.Cluster.Secret }, "0123456789abcdef"},
		{"worker: {listen: 0.0.0.0:8090, capacity: 2}", func(c *Config) any { return c.Worker }, Worker{Listen: "0.0.0.0:8090", Capacity: 2}},
		{"store: file:///srv/outprint/", func(c *Config) any { return c.Store }, "file:///srv/outprint"},
		{"store: s3://outprint/prod?region=eu-west-3&endpoint=http://s3:8333", func(c *Config) any { return c.Store },
			"s3://outprint/prod?endpoint=http%3A%2F%2Fs3%3A8333&region=eu-west-3"},
		{"admission: {slots: 3}", func(c *Config) any { return c.Admission.Slots }, 3},
		{"admission: {queueDepth: 0}", func(c *Config) any { return c.Admission.QueueDepth }, 0},
		{"admission: {queueDepth: 12}", func(c *Config) any { return c.Admission.QueueDepth }, 12},
		{"admission: {perUser: 2}", func(c *Config) any { return c.Admission.PerUser }, 2},
		{"admission: {maxWait: 90s}", func(c *Config) any { return c.Admission.MaxWait }, 90 * time.Second},
		{"admission: {maxWait: 1m30s}", func(c *Config) any { return c.Admission.MaxWait }, 90 * time.Second},
		{"admission: {previewSlots: 2}", func(c *Config) any { return c.Admission.PreviewSlots }, 2},
		{"admission: {previewSlots: 0}", func(c *Config) any { return c.Admission.PreviewSlots }, 0},
		{"outline: {url: https://wiki.example.com/}", func(c *Config) any { return c.Outline.URL }, "https://wiki.example.com"},
		{"outline: {url: 'http://10.0.0.5:3000'}", func(c *Config) any { return c.Outline.URL }, "http://10.0.0.5:3000"},
		{"outline: {url: ''}", func(c *Config) any { return c.Outline.URL }, ""},
		{"images: {allowHosts: [Images.Example.com, 'cdn.example.org:8443', '*.example.net', 192.0.2.1, '[2001:db8::1]:443']}",
			func(c *Config) any { return c.Images.AllowHosts },
			[]string{"images.example.com", "cdn.example.org:8443", "*.example.net", "192.0.2.1", "[2001:db8::1]:443"}},
		{"images: {allowHosts: []}", func(c *Config) any { return c.Images.AllowHosts }, []string(nil)},
		{"auth: {apiKeys: []}", func(c *Config) any { return c.Auth.APIKeys }, []APIKey(nil)},
		{"auth:\n  apiKeys:\n    - {user: alice, tenant: acme, sha256: " + strings.ToUpper(digestA) + "}\n    - user: bob\n      tenant: beta\n      sha256: " + digestB,
			func(c *Config) any { return c.Auth.APIKeys },
			[]APIKey{{User: "alice", Tenant: "acme", SHA256: digestA}, {User: "bob", Tenant: "beta", SHA256: digestB}}},
		{"auth:\n  apiKeys:\n    - {user: alice, tenant: acme, sha256: " + digestA + ", admin: true}\n    - {user: bob, tenant: beta, sha256: " + digestB + ", admin: false}",
			func(c *Config) any { return c.Auth.APIKeys },
			[]APIKey{{User: "alice", Tenant: "acme", SHA256: digestA, Admin: true}, {User: "bob", Tenant: "beta", SHA256: digestB}}},
		{"admin: {allowAnonymous: true}", func(c *Config) any { return c.Admin.AllowAnonymous }, true},
		{"admin: {allowAnonymous: false}", func(c *Config) any { return c.Admin.AllowAnonymous }, false},
		{"jobs: {ttl: 24h}", func(c *Config) any { return c.Jobs.TTL }, 24 * time.Hour},
		{"render: {timeout: 2m}", func(c *Config) any { return c.Render.Timeout }, 2 * time.Minute},
		{"render: {maxPages: 50}", func(c *Config) any { return c.Render.MaxPages }, 50},
		{"render: {maxPages: 500}", func(c *Config) any { return c.Render.MaxPages }, 500},
		{"render: {maxPdfBytes: 1048576}", func(c *Config) any { return c.Render.MaxPDFBytes }, int64(1 << 20)},
		{"render: {maxPdfBytes: 10MiB}", func(c *Config) any { return c.Render.MaxPDFBytes }, int64(10 << 20)},
		{"render: {maxPdfBytes: 512 KiB}", func(c *Config) any { return c.Render.MaxPDFBytes }, int64(512 << 10)},
		{"render: {maxPdfBytes: 50MiB}", func(c *Config) any { return c.Render.MaxPDFBytes }, int64(50 << 20)},
		{"pool: {min: 0}", func(c *Config) any { return c.Pool.Min }, 0},
		{"pool: {min: 2, max: 2}", func(c *Config) any { return c.Pool }, Pool{Min: 2, Max: 2}},
		{"pool: {max: 8}", func(c *Config) any { return c.Pool.Max }, 8},
		{"pool: {idleTimeout: 30s}", func(c *Config) any { return c.Pool.IdleTimeout }, 30 * time.Second},
		{"pool: {formatsDir: /var/cache/outprint}", func(c *Config) any { return c.Pool.FormatsDir }, "/var/cache/outprint"},
		{"diagrams: {enabled: false}", func(c *Config) any { return c.Diagrams.Enabled }, false},
		{"diagrams: {enabled: true, browsers: 3}", func(c *Config) any { return c.Diagrams }, Diagrams{Enabled: true, Browsers: 3}},
		{"shutdown: {grace: 0}", func(c *Config) any { return c.Shutdown.Grace }, time.Duration(0)},
		{"shutdown: {grace: 10s}", func(c *Config) any { return c.Shutdown.Grace }, 10 * time.Second},
		// An empty value keeps the default, like an absent key.
		{"admission:\n  slots:\n", func(c *Config) any { return c.Admission.Slots }, 0},
		{"admission:\n", func(c *Config) any { return c.Admission }, Default().Admission},
		{"# nothing but a comment\n", func(c *Config) any { return plain(c) }, plain(Default())},
		{"", func(c *Config) any { return plain(c) }, plain(Default())},
	} {
		c, err := Load(writeFile(t, tc.yaml), []string{"AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s"})
		if err != nil {
			t.Errorf("Load(%q) = %v, want no error", tc.yaml, err)
			continue
		}
		if got := tc.got(c); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Load(%q) = %#v, want %#v", tc.yaml, got, tc.want)
		}
	}
}

// Every variable.
func TestEnvVars(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  string
		got  func(c *Config) any
		want any
	}{
		{"OUTPRINT_LISTEN=0.0.0.0:80", func(c *Config) any { return c.Listen }, "0.0.0.0:80"},
		{"OUTPRINT_DATA_DIR=/data", func(c *Config) any { return c.DataDir }, "/data"},
		{"OUTPRINT_DATABASE=postgres://u@h/db", func(c *Config) any { return c.Database }, "postgres://u@h/db"},
		{"OUTPRINT_ADMISSION_SLOTS=4", func(c *Config) any { return c.Admission.Slots }, 4},
		{"OUTPRINT_ADMISSION_QUEUE_DEPTH=0", func(c *Config) any { return c.Admission.QueueDepth }, 0},
		{"OUTPRINT_ADMISSION_PER_USER=3", func(c *Config) any { return c.Admission.PerUser }, 3},
		{"OUTPRINT_ADMISSION_MAX_WAIT=5s", func(c *Config) any { return c.Admission.MaxWait }, 5 * time.Second},
		{"OUTPRINT_ADMISSION_PREVIEW_SLOTS=3", func(c *Config) any { return c.Admission.PreviewSlots }, 3},
		{"OUTPRINT_OUTLINE_URL=https://wiki.example.com", func(c *Config) any { return c.Outline.URL }, "https://wiki.example.com"},
		{"OUTPRINT_OUTLINE_URL=", func(c *Config) any { return c.Outline.URL }, ""},
		{"OUTPRINT_IMAGES_ALLOW_HOSTS=a.example.com, *.b.example.com ,c.example.com:8080",
			func(c *Config) any { return c.Images.AllowHosts }, []string{"a.example.com", "*.b.example.com", "c.example.com:8080"}},
		{"OUTPRINT_IMAGES_ALLOW_HOSTS=", func(c *Config) any { return c.Images.AllowHosts }, []string(nil)},
		{"OUTPRINT_JOBS_TTL=30m", func(c *Config) any { return c.Jobs.TTL }, 30 * time.Minute},
		{"OUTPRINT_JOBS_MAX_QUEUED_PER_TENANT=20", func(c *Config) any { return c.Jobs.MaxQueuedPerTenant }, 20},
		{"OUTPRINT_JOBS_MAX_STORED_BYTES_PER_TENANT=3GiB", func(c *Config) any { return c.Jobs.MaxStoredBytesPerTenant }, int64(3 << 30)},
		{"OUTPRINT_TIMEOUT=90s", func(c *Config) any { return c.Render.Timeout }, 90 * time.Second},
		{"OUTPRINT_MAX_PAGES=100", func(c *Config) any { return c.Render.MaxPages }, 100},
		{"OUTPRINT_MAX_PDF_BYTES=1000", func(c *Config) any { return c.Render.MaxPDFBytes }, int64(1000)},
		{"OUTPRINT_MAX_PDF_BYTES=20MiB", func(c *Config) any { return c.Render.MaxPDFBytes }, int64(20 << 20)},
		{"OUTPRINT_POOL_MIN=0", func(c *Config) any { return c.Pool.Min }, 0},
		{"OUTPRINT_POOL_MAX=6", func(c *Config) any { return c.Pool.Max }, 6},
		{"OUTPRINT_POOL_IDLE_TIMEOUT=1m", func(c *Config) any { return c.Pool.IdleTimeout }, time.Minute},
		{"OUTPRINT_POOL_FORMATS_DIR=/srv/formats", func(c *Config) any { return c.Pool.FormatsDir }, "/srv/formats"},
		{"OUTPRINT_DIAGRAMS_ENABLED=false", func(c *Config) any { return c.Diagrams.Enabled }, false},
		{"OUTPRINT_DIAGRAMS_BROWSERS=2", func(c *Config) any { return c.Diagrams.Browsers }, 2},
		{"OUTPRINT_OFFICE_ENABLED=false", func(c *Config) any { return c.Office.Enabled }, false},
		{"OUTPRINT_SHUTDOWN_GRACE=5s", func(c *Config) any { return c.Shutdown.Grace }, 5 * time.Second},
		{"OUTPRINT_ADMIN_ALLOW_ANONYMOUS=true", func(c *Config) any { return c.Admin.AllowAnonymous }, true},
		// Not settings: ignored.
		{"OUTPRINT_CONFIG=/etc/outprint.yaml", func(c *Config) any { return plain(c) }, plain(Default())},
		{"HOME=/root", func(c *Config) any { return plain(c) }, plain(Default())},
		{"OUTPRINT_BROKEN", func(c *Config) any { return plain(c) }, plain(Default())},
	} {
		c, err := Load("", []string{tc.env})
		if err != nil {
			t.Errorf("Load(env %s) = %v, want no error", tc.env, err)
			continue
		}
		if got := tc.got(c); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Load(env %s) = %#v, want %#v", tc.env, got, tc.want)
		}
	}
}

// The table covers every variable the package accepts.
func TestEnvVarsComplete(t *testing.T) {
	t.Parallel()
	want := []string{
		"OUTPRINT_CONFIG", "OUTPRINT_LISTEN", "OUTPRINT_DATA_DIR", "OUTPRINT_DATABASE", "OUTPRINT_STORE",
		"OUTPRINT_ADMISSION_SLOTS", "OUTPRINT_ADMISSION_QUEUE_DEPTH", "OUTPRINT_ADMISSION_PER_USER", "OUTPRINT_ADMISSION_MAX_WAIT",
		"OUTPRINT_ADMISSION_PREVIEW_SLOTS",
		"OUTPRINT_OUTLINE_URL", "OUTPRINT_IMAGES_ALLOW_HOSTS", "OUTPRINT_WEBHOOKS_ALLOW_HOSTS", "OUTPRINT_WEBHOOKS_PUBLIC_URL", "OUTPRINT_JOBS_TTL",
		"OUTPRINT_JOBS_MAX_QUEUED_PER_TENANT", "OUTPRINT_JOBS_MAX_STORED_BYTES_PER_TENANT",
		"OUTPRINT_JOBS_LEASE_TIMEOUT",
		"OUTPRINT_TIMEOUT", "OUTPRINT_MAX_PAGES", "OUTPRINT_MAX_PDF_BYTES",
		"OUTPRINT_POOL_MIN", "OUTPRINT_POOL_MAX", "OUTPRINT_POOL_IDLE_TIMEOUT", "OUTPRINT_POOL_MEMORY", "OUTPRINT_POOL_FORMATS_DIR", "OUTPRINT_DIAGRAMS_ENABLED", "OUTPRINT_DIAGRAMS_BROWSERS", "OUTPRINT_OFFICE_ENABLED",
		"OUTPRINT_SHUTDOWN_GRACE",
		"OUTPRINT_ADMIN_ALLOW_ANONYMOUS", "OUTPRINT_WORKER_LISTEN", "OUTPRINT_WORKER_CAPACITY", "OUTPRINT_GATEWAY_WORKERS",
		"OUTPRINT_CLUSTER_SECRET",
	}
	if got := EnvVars(); !reflect.DeepEqual(got, want) {
		t.Errorf("EnvVars() = %v, want %v", got, want)
	}
}

func TestEnvOverridesFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "admission:\n  slots: 2\n  perUser: 2\nlisten: 127.0.0.1:9000\n")
	c, err := Load(path, []string{"OUTPRINT_ADMISSION_SLOTS=5"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Admission.Slots != 5 || c.Admission.PerUser != 2 || c.Listen != "127.0.0.1:9000" {
		t.Errorf("Load = slots %d, perUser %d, listen %s, want 5 (env), 2 (file), 127.0.0.1:9000 (file)",
			c.Admission.Slots, c.Admission.PerUser, c.Listen)
	}
}

// Every error message of the file, with its line.
func TestFileErrors(t *testing.T) {
	t.Parallel()
	const bad = "must be a host name such as images.example.com, example.com:8443 or *.example.com, without scheme or path"
	for _, tc := range []struct {
		yaml string
		want []string // messages after "PATH:"
	}{
		{"listen: 8080", []string{`1: listen must be host:port, such as 127.0.0.1:8080 (got "8080")`}},
		{"listen: 'bad host!:80'", []string{`1: listen must be host:port, such as 127.0.0.1:8080 (got "bad host!:80")`}},
		{"listen: 127.0.0.1:99999", []string{`1: listen must be host:port with a port from 0 to 65535 (got "127.0.0.1:99999")`}},
		{"listen: [a, b]", []string{`1: listen must be host:port, such as 127.0.0.1:8080 (got a list)`}},
		{"dataDir: ''", []string{`1: dataDir must be a folder path (got "")`}},
		{"jobs: {leaseTimeout: 1s}", []string{`jobs.leaseTimeout 1s (from {file}:1) must be at least 3s: a job beats once a second, and a shorter lease takes live jobs away`}},
		{"gateway: {workers: [ftp://w:1]}", []string{`1: gateway.workers[0] must be a worker URL such as http://worker:8090 (scheme, host and port only) (got "ftp://w:1")`}},
		{"cluster: {secret: short}", []string{`1: cluster.secret must be at least 16 characters (got "xxxxx")`}},
		{"worker: {capacity: -1}", []string{`1: worker.capacity must be zero (derived from the machine) or a positive integer (got "-1")`}},
		{"store: /srv/outprint", []string{`1: store must be file:///FOLDER or s3://BUCKET/PREFIX?endpoint=URL&region=REGION (got "/srv/outprint")`}},
		{"store: s3://outprint/x", []string{`1: store needs region=…, such as s3://outprint?region=us-east-1 (self-hosted stores accept any name) (got "s3://outprint/x")`}},
		{"store: s3://outprint?region=x&secret=y", []string{`1: store unknown parameter "secret" (want endpoint and region) (got "s3://outprint?region=x&secret=y")`}},
		{"database: mysql://db/x", []string{`1: database must be sqlite://PATH or postgres://USER@HOST/DB (got "mysql://db/x")`}},
		{"database: 'sqlite://'", []string{`1: database must be sqlite://PATH or postgres://USER@HOST/DB (got "sqlite://")`}},
		// The password is masked in the message.
		{"database: postgres://u:hunter2@/db", []string{`1: database must be sqlite://PATH or postgres://USER@HOST/DB (got "postgres://u:xxxxx@/db")`}},
		{"admission:\n  slots: abc", []string{`2: admission.slots must be a positive integer (got "abc")`}},
		{"admission:\n  slots: 0", []string{`2: admission.slots must be a positive integer (got "0")`}},
		{"admission:\n  slots: 1.5", []string{`2: admission.slots must be a positive integer (got "1.5")`}},
		{"admission:\n  slots: true", []string{`2: admission.slots must be a positive integer (got "true")`}},
		{"admission:\n  slots: {n: 1}", []string{`2: admission.slots must be a positive integer (got a mapping)`}},
		{"admission:\n  queueDepth: -1", []string{`2: admission.queueDepth must be zero or a positive integer (got "-1")`}},
		{"admission:\n  perUser: 0", []string{`2: admission.perUser must be a positive integer (got "0")`}},
		{"admission:\n  maxWait: 60", []string{`2: admission.maxWait must be a positive duration such as 30s, 5m or 1h (got "60")`}},
		{"admission:\n  maxWait: 0s", []string{`2: admission.maxWait must be a positive duration such as 30s, 5m or 1h (got "0s")`}},
		{"admission:\n  maxWait: -5s", []string{`2: admission.maxWait must be a positive duration such as 30s, 5m or 1h (got "-5s")`}},
		{"admission: 5", []string{`1: admission must be a mapping of keys (got "5")`}},
		{"admission: [1]", []string{`1: admission must be a mapping of keys (got a list)`}},
		{"outline:\n  url: wiki.example.com", []string{`2: outline.url must be an http or https URL such as https://wiki.example.com (got "wiki.example.com")`}},
		{"outline:\n  url: ftp://wiki.example.com", []string{`2: outline.url must be an http or https URL such as https://wiki.example.com (got "ftp://wiki.example.com")`}},
		{"outline:\n  url: https://wiki.example.com/?x=1", []string{`2: outline.url must be Outline's base URL, without user, query or fragment (got "https://wiki.example.com/?x=1")`}},
		{"images:\n  allowHosts: example.com", []string{`2: images.allowHosts must be a list of host names (got "example.com")`}},
		{"images:\n  allowHosts:\n    - ok.example.com\n    - https://x.example.com\n    - a/b\n    - 'x:0'",
			[]string{`4: images.allowHosts[1] ` + bad + ` (got "https://x.example.com")`,
				`5: images.allowHosts[2] ` + bad + ` (got "a/b")`,
				`6: images.allowHosts[3] ` + bad + ` (got "x:0")`}},
		{"images:\n  allowHosts: [[a]]", []string{`2: images.allowHosts[0] must be a single value (got a list)`}},
		{"images:\n  allowHosts: ['-bad-.example.com']", []string{`2: images.allowHosts[0] ` + bad + ` (got "-bad-.example.com")`}},
		{"auth:\n  apiKeys: {user: a}", []string{`2: auth.apiKeys must be a list of {user, tenant, sha256} (got a mapping)`}},
		{"auth:\n  apiKeys:\n    - alice", []string{`3: auth.apiKeys[0] must be a mapping of keys (got "alice")`}},
		{"auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: " + digestA + ", admin: yes}",
			[]string{`3: auth.apiKeys[0].admin must be true or false (got "yes")`}},
		{"auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: " + digestA + ", admin: [true]}",
			[]string{`3: auth.apiKeys[0].admin must be true or false (got a list)`}},
		{"admin: {allowAnonymous: 1}", []string{`1: admin.allowAnonymous must be true or false (got "1")`}},
		{"admin: {allowAnon: true}", []string{`1: unknown key admin.allowAnon (known keys here: allowAnonymous)`}},
		{"auth:\n  apiKeys:\n    - {user: alice, tenant: acme, sha256: mysecretkey}",
			[]string{`3: auth.apiKeys[0].sha256 must be 64 hexadecimal digits, the SHA-256 of the key and not the key itself (got 11 characters)`}},
		{"auth:\n  apiKeys:\n    - {user: alice, tenant: acme}", []string{`3: auth.apiKeys[0].sha256 is missing`}},
		{"auth:\n  apiKeys:\n    - {sha256: " + digestA + "}", []string{`3: auth.apiKeys[0].user is missing`, `3: auth.apiKeys[0].tenant is missing`}},
		{"auth:\n  apiKeys:\n    - {user: '', tenant: acme, sha256: " + digestA + "}",
			[]string{`3: auth.apiKeys[0].user must be 1 to 128 bytes without control characters (got "")`}},
		{"auth:\n  apiKeys:\n    - {user: \"a\\tb\", tenant: acme, sha256: " + digestA + "}",
			[]string{`3: auth.apiKeys[0].user must be 1 to 128 bytes without control characters (got "a\tb")`}},
		{"auth:\n  apiKeys:\n    - {user: a, tenant: [x], sha256: " + digestA + "}",
			[]string{`3: auth.apiKeys[0].tenant must be a single value (got a list)`}},
		{"auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: " + digestA + "}\n    - {user: b, tenant: t, sha256: " + digestA + "}",
			[]string{`4: auth.apiKeys[1].sha256 repeats auth.apiKeys[0].sha256`}},
		{"auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: " + digestA + ", usr: x}",
			[]string{`3: unknown key auth.apiKeys[0].usr (did you mean auth.apiKeys[0].user?)`}},
		{"auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: " + digestA + ", role: x}",
			[]string{`3: unknown key auth.apiKeys[0].role (known keys here: user, tenant, sha256, admin, callbackUrl, webhookSecrets)`}},
		{"auth:\n  apiKeys:\n    - {user: a, user: b, tenant: t, sha256: " + digestA + "}",
			[]string{`3: duplicate key auth.apiKeys[0].user (first at line 3)`}},
		{"jobs:\n  ttl: forever", []string{`2: jobs.ttl must be a positive duration such as 30s, 5m or 1h (got "forever")`}},
		{"render:\n  timeout: 0s", []string{`2: render.timeout must be a positive duration such as 30s, 5m or 1h (got "0s")`}},
		{"render:\n  maxPages: 501", []string{`2: render.maxPages must be an integer from 1 to 500 (the page limit can only be lowered) (got "501")`}},
		{"render:\n  maxPages: 0", []string{`2: render.maxPages must be an integer from 1 to 500 (the page limit can only be lowered) (got "0")`}},
		{"render:\n  maxPdfBytes: 51MiB", []string{`2: render.maxPdfBytes must be a size from 1 byte to 52428800 (50 MiB), in bytes or with KiB, MiB or GiB (got "51MiB")`}},
		{"render:\n  maxPdfBytes: 52428801", []string{`2: render.maxPdfBytes must be a size from 1 byte to 52428800 (50 MiB), in bytes or with KiB, MiB or GiB (got "52428801")`}},
		{"render:\n  maxPdfBytes: 0", []string{`2: render.maxPdfBytes must be a size from 1 byte to 52428800 (50 MiB), in bytes or with KiB, MiB or GiB (got "0")`}},
		{"render:\n  maxPdfBytes: 1GB", []string{`2: render.maxPdfBytes must be a size from 1 byte to 52428800 (50 MiB), in bytes or with KiB, MiB or GiB (got "1GB")`}},
		{"pool:\n  min: -1", []string{`2: pool.min must be zero or a positive integer (got "-1")`}},
		{"pool:\n  max: -1", []string{`2: pool.max must be zero (derived from the machine) or a positive integer (got "-1")`}},
		{"pool:\n  idleTimeout: 0s", []string{`2: pool.idleTimeout must be a positive duration such as 30s, 5m or 1h (got "0s")`}},
		{"shutdown:\n  grace: -1s", []string{`2: shutdown.grace must be zero or a positive duration such as 30s, 5m or 1h (got "-1s")`}},
		// Relations between keys name both, and where they came from.
		{"pool:\n  min: 4\n  max: 2", []string{`pool.min 4 (from {file}:2) must not be above pool.max 2 (from {file}:3)`}},
		{"diagrams:\n  enabled: no", []string{`2: diagrams.enabled must be true or false (got "no")`}},
		{"admission:\n  previewSlots: -1", []string{`2: admission.previewSlots must be zero (one per two CPUs) or a positive integer (got "-1")`}},
		{"diagrams:\n  browsers: -1", []string{`2: diagrams.browsers must be zero (one per render slot) or a positive integer (got "-1")`}},
		{"diagrams:\n  enabled: false\n  browsers: 2", []string{`diagrams.browsers 2 (from {file}:3) has no effect with diagrams.enabled false (from {file}:2): remove one of them`}},
		// Unknown and duplicate keys.
		{"admission:\n  slot: 2", []string{`2: unknown key admission.slot (did you mean admission.slots?)`}},
		{"admission:\n  maxwait: 2s", []string{`2: unknown key admission.maxwait (did you mean admission.maxWait?)`}},
		{"admission:\n  colour: red", []string{`2: unknown key admission.colour (known keys here: slots, queueDepth, perUser, maxWait, previewSlots)`}},
		{"slots: 2", []string{`1: unknown key slots (did you mean admission.slots?)`}},
		{"listn: x", []string{`1: unknown key listn (did you mean listen?)`}},
		{"tls: {}", []string{`1: unknown key tls (known keys here: listen, dataDir, database, store, admission, outline, images, webhooks, auth, jobs, render, pool, diagrams, office, shutdown, admin, worker, gateway, cluster)`}},
		{"admission:\n  slots: 2\n  slots: 3", []string{`3: duplicate key admission.slots (first at line 2)`}},
		{"listen: 127.0.0.1:1\nlisten: 127.0.0.1:2", []string{`2: duplicate key listen (first at line 1)`}},
		{"? [a, b]\n: 1", []string{`1: the configuration: keys must be plain names (got a list)`}},
		// Structure.
		{"- a\n- b", []string{`1: the configuration must be a mapping of keys (got a list)`}},
		{"just text", []string{`1: the configuration must be a mapping of keys (got "just text")`}},
		{"base: &b {slots: 2}\nadmission: *b", []string{`1: unknown key base (known keys here: listen, dataDir, database, store, admission, outline, images, webhooks, auth, jobs, render, pool, diagrams, office, shutdown, admin, worker, gateway, cluster)`,
			`2: admission: YAML aliases are not supported in a configuration`}},
		{"admission:\n  <<: {slots: 2}", []string{`2: admission: keys must be plain names (got "<<")`}},
		// Webhooks (issue 16): secrets are never echoed.
		{"auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: " + digestA + ", webhookSecrets: [whsec_c2hvcnQ=]}",
			[]string{`3: auth.apiKeys[0].webhookSecrets[0] must be whsec_ followed by the base64 of 24 to 64 random bytes, e.g. whsec_$(head -c 32 /dev/urandom | base64) (got 14 characters)`}},
		{"auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: " + digestA + ", webhookSecrets: [a, b, c]}",
			[]string{`3: auth.apiKeys[0].webhookSecrets lists 3 secrets; at most 2 are active at once (the current and the next)`}},
		{"auth:\n  apiKeys:\n    - {user: a, tenant: t, sha256: " + digestA + ", callbackUrl: 'ftp://x/y'}",
			[]string{`3: auth.apiKeys[0].callbackUrl must be an https URL such as https://example.com/hooks/outprint, without user or fragment (got "ftp://x/y")`}},
		{"webhooks:\n  allowHosts: [http://x]", []string{`2: webhooks.allowHosts[0] must be a host name such as images.example.com, example.com:8443 or *.example.com, without scheme or path (got "http://x")`}},
		{"webhooks:\n  publicUrl: outprint.example.com", []string{`2: webhooks.publicUrl must be an http or https URL such as https://outprint.example.com (got "outprint.example.com")`}},
		{"listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2", []string{`2: more than one YAML document; a configuration is one mapping`}},
	} {
		path := writeFile(t, tc.yaml)
		_, err := Load(path, nil)
		want := make([]string, len(tc.want))
		for i, w := range tc.want {
			if strings.Contains(w, "{file}") {
				want[i] = strings.ReplaceAll(w, "{file}", path)
			} else {
				want[i] = path + ":" + w
			}
		}
		if got := errLines(err); !reflect.DeepEqual(got, want) {
			t.Errorf("Load(%q) errors =\n  %s\nwant\n  %s", tc.yaml, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}

// A YAML syntax error names the file and yaml's own line.
func TestSyntaxError(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"admission:\n  slots: [1\n",
		"listen: 127.0.0.1:1\n---\nadmission: [\n", // in a second document
	} {
		path := writeFile(t, text)
		_, err := Load(path, nil)
		if err == nil || !strings.HasPrefix(err.Error(), path+": yaml: line") {
			t.Errorf("Load(%q) = %v, want an error starting %q", text, err, path+": yaml: line")
		}
	}
}

func TestMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := Load(path, nil)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("Load(missing file) = %v, want an error wrapping os.ErrNotExist and naming the file", err)
	}
}

// Every error message of the environment, naming the variable.
func TestEnvErrors(t *testing.T) {
	t.Parallel()
	const bad = "must be a host name such as images.example.com, example.com:8443 or *.example.com, without scheme or path"
	for _, tc := range []struct {
		env  string
		want []string
	}{
		{"OUTPRINT_ADMISSION_SLOTS=abc", []string{`OUTPRINT_ADMISSION_SLOTS must be a positive integer (got "abc")`}},
		{"OUTPRINT_ADMISSION_SLOTS=", []string{`OUTPRINT_ADMISSION_SLOTS must be a positive integer (got "")`}},
		{"OUTPRINT_ADMISSION_SLOTS=0", []string{`OUTPRINT_ADMISSION_SLOTS must be a positive integer (got "0")`}},
		{"OUTPRINT_ADMISSION_QUEUE_DEPTH=-2", []string{`OUTPRINT_ADMISSION_QUEUE_DEPTH must be zero or a positive integer (got "-2")`}},
		{"OUTPRINT_ADMISSION_PER_USER=many", []string{`OUTPRINT_ADMISSION_PER_USER must be a positive integer (got "many")`}},
		{"OUTPRINT_ADMISSION_MAX_WAIT=60", []string{`OUTPRINT_ADMISSION_MAX_WAIT must be a positive duration such as 30s, 5m or 1h (got "60")`}},
		{"OUTPRINT_LISTEN=", []string{`OUTPRINT_LISTEN must be host:port, such as 127.0.0.1:8080 (got "")`}},
		{"OUTPRINT_DATA_DIR=", []string{`OUTPRINT_DATA_DIR must be a folder path (got "")`}},
		{"OUTPRINT_DATABASE=postgres://u:pw@", []string{`OUTPRINT_DATABASE must be sqlite://PATH or postgres://USER@HOST/DB (got "postgres://u:xxxxx@")`}},
		{"OUTPRINT_OUTLINE_URL=wiki", []string{`OUTPRINT_OUTLINE_URL must be an http or https URL such as https://wiki.example.com (got "wiki")`}},
		{"OUTPRINT_IMAGES_ALLOW_HOSTS=a.example.com,http://b", []string{`OUTPRINT_IMAGES_ALLOW_HOSTS item 2 ` + bad + ` (got "http://b")`}},
		{"OUTPRINT_IMAGES_ALLOW_HOSTS=a.example.com,,b.example.com", []string{`OUTPRINT_IMAGES_ALLOW_HOSTS item 2 ` + bad + ` (got "")`}},
		{"OUTPRINT_JOBS_TTL=0s", []string{`OUTPRINT_JOBS_TTL must be a positive duration such as 30s, 5m or 1h (got "0s")`}},
		{"OUTPRINT_JOBS_MAX_QUEUED_PER_TENANT=0", []string{`OUTPRINT_JOBS_MAX_QUEUED_PER_TENANT must be a positive integer (got "0")`}},
		{"OUTPRINT_JOBS_MAX_STORED_BYTES_PER_TENANT=2TiB", []string{`OUTPRINT_JOBS_MAX_STORED_BYTES_PER_TENANT must be a size from 1 byte to 1099511627776 (1024 GiB), in bytes or with KiB, MiB or GiB (got "2TiB")`}},
		{"OUTPRINT_TIMEOUT=soon", []string{`OUTPRINT_TIMEOUT must be a positive duration such as 30s, 5m or 1h (got "soon")`}},
		{"OUTPRINT_MAX_PAGES=1000", []string{`OUTPRINT_MAX_PAGES must be an integer from 1 to 500 (the page limit can only be lowered) (got "1000")`}},
		{"OUTPRINT_MAX_PDF_BYTES=100MiB", []string{`OUTPRINT_MAX_PDF_BYTES must be a size from 1 byte to 52428800 (50 MiB), in bytes or with KiB, MiB or GiB (got "100MiB")`}},
		{"OUTPRINT_POOL_MIN=x", []string{`OUTPRINT_POOL_MIN must be zero or a positive integer (got "x")`}},
		{"OUTPRINT_POOL_MAX=-1", []string{`OUTPRINT_POOL_MAX must be zero (derived from the machine) or a positive integer (got "-1")`}},
		{"OUTPRINT_POOL_IDLE_TIMEOUT=0", []string{`OUTPRINT_POOL_IDLE_TIMEOUT must be a positive duration such as 30s, 5m or 1h (got "0")`}},
		{"OUTPRINT_SHUTDOWN_GRACE=-1s", []string{`OUTPRINT_SHUTDOWN_GRACE must be zero or a positive duration such as 30s, 5m or 1h (got "-1s")`}},
		{"OUTPRINT_ADMIN_ALLOW_ANONYMOUS=yes", []string{`OUTPRINT_ADMIN_ALLOW_ANONYMOUS must be true or false (got "yes")`}},
		{"OUTPRINT_ADMISION_SLOTS=2", []string{`unknown environment variable OUTPRINT_ADMISION_SLOTS (did you mean OUTPRINT_ADMISSION_SLOTS?)`}},
		{"OUTPRINT_MAX_PDF_SIZE=2", []string{`unknown environment variable OUTPRINT_MAX_PDF_SIZE (did you mean OUTPRINT_MAX_PDF_BYTES?)`}},
		{"OUTPRINT_COLOUR=red", []string{`unknown environment variable OUTPRINT_COLOUR`}},
		// Crash failpoints are armed by tests in Go, never by the
		// environment of the shipped binary.
		{"OUTPRINT_FAILPOINT=during-render", []string{`unknown environment variable OUTPRINT_FAILPOINT`}},
		{"OUTPRINT_AUTH_API_KEYS=x", []string{`OUTPRINT_AUTH_API_KEYS is not allowed: API keys come only from the configuration file (auth.apiKeys)`}},
		{"OUTPRINT_POOL_MIN=3", nil},
	} {
		env := []string{tc.env}
		if tc.want == nil {
			// A relation between keys from the environment names the
			// variables.
			env = append(env, "OUTPRINT_POOL_MAX=2")
			tc.want = []string{`pool.min 3 (from OUTPRINT_POOL_MIN) must not be above pool.max 2 (from OUTPRINT_POOL_MAX)`}
		}
		_, err := Load("", env)
		if got := errLines(err); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Load(env %s) errors =\n  %s\nwant\n  %s", tc.env, strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
		}
	}
}

// Every problem of the file and of the environment is reported at once.
func TestAllErrorsAtOnce(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "admission:\n  slots: 0\n  perUser: 0\nrender:\n  maxPages: 900\ncolour: red\n")
	c, err := Load(path, []string{"OUTPRINT_ADMISSION_SLOTS=abc", "OUTPRINT_TYPO=1", "OUTPRINT_JOBS_TTL=x"})
	if c != nil {
		t.Error("Load with errors returned a Config, want nil")
	}
	got := errLines(err)
	if len(got) != 7 {
		t.Fatalf("Load reported %d errors, want 7:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, prefix := range []string{path + ":2:", path + ":3:", path + ":5:", path + ":6:",
		"OUTPRINT_ADMISSION_SLOTS", "unknown environment variable OUTPRINT_TYPO", "OUTPRINT_JOBS_TTL"} {
		if !strings.HasPrefix(got[i], prefix) {
			t.Errorf("error %d = %q, want it to start with %q", i, got[i], prefix)
		}
	}
}

func TestAnonymous(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    Config
		want bool
	}{
		{Config{}, true},
		{Config{Outline: Outline{URL: "https://wiki.example.com"}}, false},
		{Config{Auth: Auth{APIKeys: []APIKey{{User: "a", Tenant: "t", SHA256: digestA}}}}, false},
	} {
		if got := tc.c.Anonymous(); got != tc.want {
			t.Errorf("Anonymous(%+v) = %v, want %v", tc.c, got, tc.want)
		}
	}
}

func TestLookupAdmin(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "auth:\n  apiKeys:\n    - {user: alice, tenant: acme, sha256: "+strings.ToUpper(digestA)+", admin: true}\n    - {user: bob, tenant: beta, sha256: "+digestB+"}\n")
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bearer, user string
		admin, ok    bool
	}{
		{"secret", "alice", true, true},
		{"test", "bob", false, true},
		{"Secret", "", false, false},
		{"", "", false, false},
	} {
		user, admin, ok := c.LookupAdmin(tc.bearer)
		if user != tc.user || admin != tc.admin || ok != tc.ok {
			t.Errorf("LookupAdmin(%q) = %q, %v, %v, want %q, %v, %v", tc.bearer, user, admin, ok, tc.user, tc.admin, tc.ok)
		}
	}
}

func TestLookupKey(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "auth:\n  apiKeys:\n    - {user: alice, tenant: acme, sha256: "+strings.ToUpper(digestA)+"}\n    - {user: bob, tenant: beta, sha256: "+digestB+"}\n")
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bearer, user, tenant string
		ok                   bool
	}{
		{"secret", "alice", "acme", true},
		{"test", "bob", "beta", true},
		{"Secret", "", "", false},
		{"secret ", "", "", false},
		{"", "", "", false},
		{digestA, "", "", false}, // the digest itself is not a key
	} {
		user, tenant, ok := c.LookupKey(tc.bearer)
		if user != tc.user || tenant != tc.tenant || ok != tc.ok {
			t.Errorf("LookupKey(%q) = %q, %q, %v, want %q, %q, %v", tc.bearer, user, tenant, ok, tc.user, tc.tenant, tc.ok)
		}
	}
	// A hand-made Config (as other packages' tests build) works too, and
	// a malformed digest never matches.
	hand := &Config{Auth: Auth{APIKeys: []APIKey{{User: "x", Tenant: "y", SHA256: "zz"}, {User: "c", Tenant: "d", SHA256: KeyDigest("k")}}}}
	if user, tenant, ok := hand.LookupKey("k"); !ok || user != "c" || tenant != "d" {
		t.Errorf("LookupKey(k) on a hand-made Config = %q, %q, %v, want c, d, true", user, tenant, ok)
	}
}

func TestKeyDigest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ key, want string }{{"secret", digestA}, {"test", digestB}} {
		if got := KeyDigest(tc.key); got != tc.want {
			t.Errorf("KeyDigest(%q) = %s, want %s", tc.key, got, tc.want)
		}
	}
}

func TestOutlineURL(t *testing.T) {
	t.Parallel()
	if u := Default().OutlineURL(); u != nil {
		t.Errorf("OutlineURL() without Outline = %v, want nil", u)
	}
	c, err := Load("", []string{"OUTPRINT_OUTLINE_URL=https://wiki.example.com:8443/"})
	if err != nil {
		t.Fatal(err)
	}
	if u := c.OutlineURL(); u == nil || u.Host != "wiki.example.com:8443" || u.Scheme != "https" || u.Path != "" {
		t.Errorf("OutlineURL() = %v, want https://wiki.example.com:8443", u)
	}
}

func TestPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag string
		env  []string
		want string
	}{
		{"", nil, ""},
		{"a.yaml", []string{"OUTPRINT_CONFIG=b.yaml"}, "a.yaml"},
		{"", []string{"OUTPRINT_CONFIG=b.yaml"}, "b.yaml"},
		{"", []string{"OUTPRINT_CONFIG=b.yaml", "OUTPRINT_CONFIG=c.yaml"}, "c.yaml"},
		{"", []string{"OUTPRINT_CONFIGX=b.yaml"}, ""},
	} {
		if got := Path(tc.flag, tc.env); got != tc.want {
			t.Errorf("Path(%q, %v) = %q, want %q", tc.flag, tc.env, got, tc.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {30 * time.Second, "30s"}, {60 * time.Second, "60s"}, {90 * time.Second, "90s"},
		{5 * time.Minute, "5m"}, {time.Hour, "1h"}, {36 * time.Hour, "36h"}, {1500 * time.Millisecond, "1.5s"},
	} {
		if got := formatDuration(tc.d); got != tc.want {
			t.Errorf("formatDuration(%s) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// An s3:// store without its credentials in the environment is refused at
// load, naming both variables, wherever the store setting came from.
func TestStoreCredentials(t *testing.T) {
	t.Parallel()
	env := []string{"OUTPRINT_STORE=s3://outprint?region=us-east-1"}
	_, err := Load("", env)
	for _, want := range []string{
		"store s3://outprint?region=us-east-1 (from OUTPRINT_STORE) needs AWS_ACCESS_KEY_ID in the environment",
		"needs AWS_SECRET_ACCESS_KEY in the environment",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%v) = %v, want an error containing %q", env, err, want)
		}
	}
	c, err := Load("", append(env, "AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s"))
	if err != nil || c.Store != "s3://outprint?region=us-east-1" {
		t.Errorf("Load with credentials = %v, %v, want the store", c, err)
	}
}
