// Package config reads outprint's service configuration (SPEC §6): a YAML
// file and OUTPRINT_* environment variables. It holds the file's shape and
// nothing else: a setting left out stays zero, and zero means "the
// default of the package that owns the setting" — admission.DefaultSlots,
// jobs.DefaultTTL, tex.DefaultPoolMin, service.DefaultListen and so on,
// each a constant of its package filled by that package's WithDefaults.
// The few settings whose zero is a value of its own (admission.queueDepth,
// pool.min, shutdown.grace) are told apart from unset by Set. So config
// links no engine (River, SQLite, the S3 client); `outprint config check`
// prints the effective values the packages fill in (service.Effective).
//
// Both are strict, because a typo that silently keeps a default is worse
// than a process that does not start: an unknown key, a duplicate key, a
// value of the wrong type or out of range, and an unknown OUTPRINT_*
// variable are errors that name the key (with file and line) or the
// variable. Load reports every error at once, so an operator fixes a
// configuration in one pass.
//
// Every setting has one entry in a table (settings.go) that gives its key,
// its variable and its parser; the file and the environment go through the
// same parser, so they are validated the same way by construction.
//
// Only cmd/outprint assembles a Config; the packages it configures take
// their own small option structs, which internal/service fills from it.
package config

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/outprint/outprint/internal/limits"
)

// EnvConfig names the configuration file when --config is not given. It
// is the one OUTPRINT_* variable that is not a setting: Load accepts and
// ignores it; every other unknown OUTPRINT_* variable is an error.
const EnvConfig = "OUTPRINT_CONFIG"

// Config is the service configuration as the file and the environment
// give it; zero is "the package's default" (see the package comment).
// Default returns the configuration of an empty file; Load applies a file
// and the environment.
type Config struct {
	// Listen is the HTTP listen address, host:port (default
	// service.DefaultListen, 127.0.0.1:8080; OUTPRINT_LISTEN). Without API
	// keys and Outline it must be a loopback address (service.CheckRole).
	Listen string
	// DataDir holds the embedded database, job inputs and results
	// (default service.DefaultDataDir, ./outprint-data;
	// OUTPRINT_DATA_DIR).
	DataDir string
	// Database is sqlite://PATH or postgres://… (default
	// sqlite://<DataDir>/outprint.db; OUTPRINT_DATABASE).
	Database string
	// Store is where job inputs and results live: file:///FOLDER or
	// s3://BUCKET/PREFIX?endpoint=URL&region=REGION (default "": the
	// data folder; OUTPRINT_STORE). S3 credentials come only from
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	Store string
	// Admission bounds concurrent renders (SPEC §4).
	Admission Admission
	// Outline connects outprint to an Outline wiki.
	Outline Outline
	// Images bounds where external images come from.
	Images Images
	// Webhooks bounds where job callbacks go.
	Webhooks Webhooks
	// Auth holds the API keys.
	Auth Auth
	// Jobs sets job retention.
	Jobs Jobs
	// Render holds the configurable render limits (SPEC §3).
	Render Render
	// Pool sizes the warm TeX pool.
	Pool Pool
	// Diagrams sets the drawing of Mermaid and Graphviz fences.
	Diagrams Diagrams
	// Office sets the conversion of Office documents.
	Office Office
	// Shutdown bounds a graceful stop.
	Shutdown Shutdown
	// Admin sets who may open the operators' console.
	Admin Admin
	// Worker configures `outprint worker`.
	Worker Worker
	// Gateway configures `outprint gateway`.
	Gateway Gateway
	// Cluster holds what gateways and workers share.
	Cluster Cluster

	// origins says where each key's value came from ("file.yaml:5",
	// "OUTPRINT_LISTEN"); keys at their default are absent. Set, Effective
	// and messages that relate two keys use it.
	origins map[string]string
}

// Admission holds the admission control bounds (SPEC §4).
type Admission struct {
	// Slots is how many renders run at once (default
	// admission.DefaultSlots, positive; OUTPRINT_ADMISSION_SLOTS).
	Slots int
	// QueueDepth is how many requests may wait for a slot (default
	// admission.DefaultQueueDepth, zero or positive: zero, when Set, is
	// no queue; OUTPRINT_ADMISSION_QUEUE_DEPTH).
	QueueDepth int
	// PerUser is how many renders one user may have queued and running
	// (default admission.DefaultPerUser, positive;
	// OUTPRINT_ADMISSION_PER_USER).
	PerUser int
	// MaxWait bounds a wait in the queue (default
	// admission.DefaultMaxWait, positive; OUTPRINT_ADMISSION_MAX_WAIT).
	MaxWait time.Duration
	// PreviewSlots is how many page previews are drawn at once, in a pool
	// apart from the render slots with the same queue, per-user bound and
	// wait (default 0: worker.DefaultPreviewSlots, one per two CPUs;
	// OUTPRINT_ADMISSION_PREVIEW_SLOTS).
	PreviewSlots int
}

// Outline holds the Outline connection.
type Outline struct {
	// URL is Outline's public URL, e.g. https://wiki.example.com, without
	// a trailing slash (default "": Outline off; OUTPRINT_OUTLINE_URL).
	// It enables /render and /status.
	URL string
}

// Images bounds external images.
type Images struct {
	// AllowHosts are the hosts external images may come from besides
	// Outline (default none; OUTPRINT_IMAGES_ALLOW_HOSTS, comma-separated):
	// "example.com" (any port), "example.com:8443" or "*.example.com"
	// (any subdomain), lower-cased.
	AllowHosts []string
}

// Auth holds the API keys. They come only from the file.
type Auth struct {
	// APIKeys are the accepted API keys as SHA-256 digests (default none).
	APIKeys []APIKey
}

// APIKey is one accepted API key: its digest, and the user and tenant a
// request with it acts as.
type APIKey struct {
	User   string
	Tenant string
	// SHA256 is the lower-case hex SHA-256 of the key (64 digits); the
	// key itself is never configured.
	SHA256 string
	// Admin lets the key open the operators' console, River's web UI
	// under /admin/river/ (default false).
	Admin bool
	// CallbackURL is the default callback of this key's jobs (optional,
	// callbackUrl).
	CallbackURL string
	// WebhookSecrets sign the tenant's webhooks (optional,
	// webhookSecrets: up to two "whsec_" + base64 secrets, both signing
	// while one rotates). Never shown by Effective.
	WebhookSecrets []string
}

// Worker configures `outprint worker`.
type Worker struct {
	// Listen is the worker's listener for gateways (POST
	// /v1/worker/render, /healthz, /readyz, /metrics; default
	// service.DefaultWorkerListen, 127.0.0.1:8090;
	// OUTPRINT_WORKER_LISTEN).
	Listen string
	// Capacity is how many renders, synchronous and job renders
	// together, the worker runs at once (default 0: derived from the
	// cgroup CPU and memory limits, tex.DefaultCapacity;
	// OUTPRINT_WORKER_CAPACITY).
	Capacity int
}

// Gateway configures `outprint gateway`.
type Gateway struct {
	// Workers are the workers' base URLs, e.g. http://worker:8090; a host
	// name that resolves to several addresses counts as one worker per
	// address (default none; OUTPRINT_GATEWAY_WORKERS, comma-separated).
	Workers []string
}

// Cluster holds what gateways and workers share.
type Cluster struct {
	// Secret is presented by gateways to workers and checked by workers
	// in constant time; required by both roles (default none;
	// OUTPRINT_CLUSTER_SECRET; at least 16 characters).
	Secret string
}

// Admin sets who may open the operators' console.
type Admin struct {
	// AllowAnonymous opens the console to anonymous requests in anonymous
	// mode (no API keys, no Outline: loopback only), where no admin key
	// can exist (default false; OUTPRINT_ADMIN_ALLOW_ANONYMOUS). With API
	// keys configured it changes nothing: the console needs an admin key.
	AllowAnonymous bool
}

// Jobs sets job retention.
type Jobs struct {
	// TTL is how long job inputs and results are kept (default
	// jobs.DefaultTTL, positive; OUTPRINT_JOBS_TTL).
	TTL time.Duration
	// MaxQueuedPerTenant bounds the jobs one tenant may have queued or
	// running; more are refused 429 quota (default
	// jobs.DefaultMaxQueuedPerTenant, positive;
	// OUTPRINT_JOBS_MAX_QUEUED_PER_TENANT).
	MaxQueuedPerTenant int
	// MaxStoredBytesPerTenant bounds the bytes of job inputs and results
	// one tenant may keep; more are refused 507 quota (default
	// jobs.DefaultMaxStoredBytesPerTenant, 1 byte to 1 TiB;
	// OUTPRINT_JOBS_MAX_STORED_BYTES_PER_TENANT).
	MaxStoredBytesPerTenant int64
	// LeaseTimeout is how old a running job's progress beat may get before
	// the leader takes the job back and retries it elsewhere (default
	// jobs.DefaultLeaseTimeout, at least 3s; OUTPRINT_JOBS_LEASE_TIMEOUT).
	LeaseTimeout time.Duration
}

// Render holds the render limits an operator may set (SPEC §3).
type Render struct {
	// Timeout bounds one render (default limits.DefaultRenderTimeout,
	// positive; OUTPRINT_TIMEOUT).
	Timeout time.Duration
	// MaxPages is the page limit (default limits.DefaultMaxPages, 1 to
	// 500: it can only be lowered; OUTPRINT_MAX_PAGES).
	MaxPages int
	// MaxPDFBytes is the PDF size limit (default limits.MaxPDFBytes, 1 byte
	// to 50 MiB; OUTPRINT_MAX_PDF_BYTES). Suffixes KiB and MiB are
	// accepted.
	MaxPDFBytes int64
}

// Limits returns the render bounds in the shape the render pipeline takes,
// the unset ones at limits' defaults.
func (r Render) Limits() limits.Render {
	return limits.Render{Timeout: r.Timeout, MaxPages: r.MaxPages, MaxPDFBytes: r.MaxPDFBytes}.WithDefaults()
}

// Pool sizes the warm TeX pool.
type Pool struct {
	// Min is how many warm processes are kept even when idle (default
	// tex.DefaultPoolMin, zero or positive: zero, when Set, is none;
	// OUTPRINT_POOL_MIN).
	Min int
	// Max bounds the pool, and with it the render budget (default 0:
	// derived by the tex package from the cgroup CPU and memory limits at
	// startup; OUTPRINT_POOL_MAX). When set, Min must not exceed it.
	Max int
	// IdleTimeout ends warm processes above Min that waited this long
	// (default tex.DefaultPoolIdleTimeout, positive;
	// OUTPRINT_POOL_IDLE_TIMEOUT).
	IdleTimeout time.Duration
	// Memory is the budget of the pool's TeX processes and zygotes, in
	// bytes (default 0: derived by the tex package from the cgroup memory
	// limit at startup, tex.DefaultPoolMemory; OUTPRINT_POOL_MEMORY).
	Memory int64
	// FormatsDir keeps the TeX formats the pool dumps (one per paper,
	// some 33 MB each), shared by the processes that point at it and kept
	// across restarts, so a restarted process does not dump them again
	// (default <DataDir>/formats; OUTPRINT_POOL_FORMATS_DIR).
	FormatsDir string
}

// Diagrams sets the drawing of ```mermaid, ```mermaidjs, ```dot and
// ```graphviz fences (internal/diagram).
type Diagrams struct {
	// Enabled draws such fences as diagrams (default
	// diagram.DefaultEnabled, true: when Chromium, the Mermaid bundle or
	// dot is missing, a diagram that needs it is a 422 saying so; false,
	// when Set, prints them as code; OUTPRINT_DIAGRAMS_ENABLED).
	Enabled bool
	// Browsers bounds the warm Chromium processes that draw Mermaid
	// diagrams (default 0: one per render slot, admission.slots or
	// worker.capacity, since a render holds its slot while it draws;
	// OUTPRINT_DIAGRAMS_BROWSERS).
	Browsers int
}

// Office sets the conversion of Office documents (DOCX, XLSX, PPTX, …).
type Office struct {
	// Enabled keeps a warm LibreOffice process per render slot on serve
	// and worker (default office.DefaultEnabled, true; false, when Set,
	// starts none and refuses an Office document 422 as a server without
	// LibreOffice does, which saves about 200 MiB of memory and a few
	// CPU-seconds at startup per slot; OUTPRINT_OFFICE_ENABLED).
	Enabled bool
}

// Shutdown bounds a graceful stop.
type Shutdown struct {
	// Grace is how long running renders may finish after SIGTERM (default
	// service.DefaultGrace, zero or positive: zero, when Set, is none;
	// OUTPRINT_SHUTDOWN_GRACE).
	Grace time.Duration
}

// Default returns the configuration of an empty file: every setting
// unset, so every package keeps its own default.
func Default() *Config {
	return &Config{origins: map[string]string{}}
}

// Set reports whether key ("admission.queueDepth") was given by the file
// or the environment: for the settings whose zero is a value of its own.
func (c *Config) Set(key string) bool {
	_, ok := c.origins[key]
	return ok
}

// Origin says where key's value came from ("outprint.yaml:5",
// "OUTPRINT_LISTEN"), "" when it was not given.
func (c *Config) Origin(key string) string { return c.origins[key] }

// Load returns the configuration: the YAML file at path (none when path
// is ""), and the OUTPRINT_* variables of env (os.Environ() form,
// "NAME=value") over it. It reports every problem
// at once, joined with errors.Join; with any, the Config is nil.
func Load(path string, env []string) (*Config, error) {
	c := Default()
	var errs []error
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read configuration: %w", err)
		}
		errs = append(errs, c.applyFile(path, data)...)
	}
	errs = append(errs, c.applyEnv(env)...)
	errs = append(errs, c.check()...)
	errs = append(errs, c.checkCredentials(env)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// applyFile decodes one YAML document and applies its keys.
func (c *Config) applyFile(path string, data []byte) []error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file keeps every default
		}
		return []error{fmt.Errorf("%s: %w", path, err)}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return []error{fmt.Errorf("%s: %w", path, err)}
	default:
		return []error{fmt.Errorf("%s:%d: more than one YAML document; a configuration is one mapping", path, extra.Line)}
	}
	f := &fileDecoder{path: path, c: c}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if isNull(root) {
		return nil
	}
	f.mapping(root, "")
	return f.sorted()
}

// applyEnv applies the OUTPRINT_* variables of env.
func (c *Config) applyEnv(env []string) []error {
	var errs []error
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, "OUTPRINT_") || name == EnvConfig {
			continue
		}
		s := findEnv(name)
		switch {
		case strings.HasPrefix(name, "OUTPRINT_AUTH"):
			errs = append(errs, fmt.Errorf("%s is not allowed: API keys come only from the configuration file (auth.apiKeys)", name))
		case s == nil:
			msg := fmt.Sprintf("unknown environment variable %s", name)
			if guess := suggest(name, envNames()); guess != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", guess)
			}
			errs = append(errs, errors.New(msg))
		case s.list != nil:
			var items []string
			if strings.TrimSpace(value) != "" {
				items = strings.Split(value, ",")
			}
			out, bad := checkList(s, items)
			for _, b := range bad {
				errs = append(errs, fmt.Errorf("%s item %d %s (got %q)", name, b.i+1, b.reason, b.raw))
			}
			if len(bad) == 0 {
				s.setList(c, out)
				c.origins[s.key] = name
			}
		default:
			if reason := s.scalar(c, value); reason != "" {
				errs = append(errs, fmt.Errorf("%s %s (got %q)", name, reason, s.quote(value)))
			} else {
				c.origins[s.key] = name
			}
		}
	}
	return errs
}

// listProblem is one refused item of a list setting.
type listProblem struct {
	i           int // 0-based index
	reason, raw string
}

// checkList normalizes and checks the items of a list setting.
func checkList(s *setting, items []string) (out []string, bad []listProblem) {
	out = make([]string, 0, len(items))
	for i, raw := range items {
		v, reason := s.list(strings.TrimSpace(raw))
		if reason != "" {
			bad = append(bad, listProblem{i, reason, raw})
			continue
		}
		out = append(out, v)
	}
	return out, bad
}

// check validates what single settings cannot: relations between keys.
func (c *Config) check() []error {
	var errs []error
	if c.Jobs.LeaseTimeout != 0 && c.Jobs.LeaseTimeout < 3*time.Second {
		errs = append(errs, fmt.Errorf("jobs.leaseTimeout %s%s must be at least 3s: a job beats once a second, and a shorter lease takes live jobs away",
			c.Jobs.LeaseTimeout, c.from("jobs.leaseTimeout")))
	}
	if c.Pool.Max > 0 && c.Pool.Min > c.Pool.Max {
		errs = append(errs, fmt.Errorf("pool.min %d%s must not be above pool.max %d%s",
			c.Pool.Min, c.from("pool.min"), c.Pool.Max, c.from("pool.max")))
	}
	if c.Diagrams.Browsers > 0 && c.Set("diagrams.enabled") && !c.Diagrams.Enabled {
		errs = append(errs, fmt.Errorf("diagrams.browsers %d%s has no effect with diagrams.enabled false%s: remove one of them",
			c.Diagrams.Browsers, c.from("diagrams.browsers"), c.from("diagrams.enabled")))
	}
	return errs
}

// checkCredentials refuses an s3:// store without its credentials in the
// environment: they never come from the file, and a process that starts
// without them would fail on its first job instead of at startup.
func (c *Config) checkCredentials(env []string) []error {
	if !strings.HasPrefix(c.Store, "s3:") {
		return nil
	}
	var errs []error
	for _, name := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		found := false
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, name+"="); ok && v != "" {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("store %s%s needs %s in the environment (S3 credentials never come from the file)", c.Store, c.from("store"), name))
		}
	}
	return errs
}

// from returns " (from ORIGIN)" for a key that did not keep its default.
func (c *Config) from(key string) string {
	if o, ok := c.origins[key]; ok {
		return " (from " + o + ")"
	}
	return ""
}

// Anonymous reports whether requests are accepted without credentials, as
// user "local": no API keys and no Outline are configured.
func (c *Config) Anonymous() bool {
	return len(c.Auth.APIKeys) == 0 && c.Outline.URL == ""
}

// LookupKey returns the user and tenant of the API key bearer (the token of
// an Authorization: Bearer header). The SHA-256 of bearer is compared with
// every configured digest in constant time, so neither the answer's timing
// nor which key matched tells anything about the configured digests.
func (c *Config) LookupKey(bearer string) (user, tenant string, ok bool) {
	if bearer == "" {
		return "", "", false
	}
	sum := sha256.Sum256([]byte(bearer))
	found := -1
	for i, k := range c.Auth.APIKeys {
		want, err := hex.DecodeString(k.SHA256)
		if err != nil || len(want) != sha256.Size {
			continue
		}
		if subtle.ConstantTimeCompare(sum[:], want) == 1 && found < 0 {
			found = i
		}
	}
	if found < 0 {
		return "", "", false
	}
	return c.Auth.APIKeys[found].User, c.Auth.APIKeys[found].Tenant, true
}

// LookupAdmin returns the user of the API key bearer and whether the key
// is marked admin (auth.apiKeys[].admin); ok is false for an unknown key.
// It compares like LookupKey.
func (c *Config) LookupAdmin(bearer string) (user string, admin, ok bool) {
	user, _, ok = c.LookupKey(bearer)
	if !ok {
		return "", false, false
	}
	sum := sha256.Sum256([]byte(bearer))
	d := hex.EncodeToString(sum[:])
	for _, k := range c.Auth.APIKeys {
		if k.SHA256 == d {
			return user, k.Admin, true
		}
	}
	return user, false, true
}

// KeyDigest returns the lower-case hex SHA-256 of an API key: the value
// auth.apiKeys[].sha256 wants.
func KeyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// OutlineURL returns Outline's URL parsed, or nil when Outline is off.
func (c *Config) OutlineURL() *url.URL {
	if c.Outline.URL == "" {
		return nil
	}
	u, err := url.Parse(c.Outline.URL)
	if err != nil {
		return nil // Load validated it; a hand-made Config may not be.
	}
	return u
}

// Path returns the configuration file to load: flag (from --config) when
// set, otherwise OUTPRINT_CONFIG from env, otherwise "" (embedded defaults
// only).
func Path(flag string, env []string) string {
	if flag != "" {
		return flag
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, EnvConfig+"="); ok {
			path = v // the last one wins, as in os/exec
		}
	}
	return path
}
