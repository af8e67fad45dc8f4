package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/outprint/outprint/internal/limits"
	"github.com/outprint/outprint/internal/store/location"
)

// setting is one configuration key: where it lives in the file, which
// variable overrides it, and how a value is parsed, checked, stored and
// shown. Exactly one of scalar, list or file is set.
type setting struct {
	key  string // path in the file, e.g. "admission.slots"
	env  string // OUTPRINT_* variable; "" for file-only keys
	want string // what a value must be, for messages ("must be a positive integer")

	// scalar parses v and stores it; it returns "" or why v was refused.
	scalar func(c *Config, v string) (reason string)
	// list normalizes and checks one item of a list setting; setList
	// stores the whole list once every item passed.
	list    func(item string) (v, reason string)
	setList func(c *Config, v []string)
	// file decodes the key's YAML node itself (auth.apiKeys).
	file func(f *fileDecoder, n *yaml.Node, key string)

	// show renders the value for Effective: a scalar for scalar settings,
	// a node for the others.
	show     func(c *Config) string
	showNode func(c *Config) *yaml.Node
	// note adds a remark to the value in Effective ("" for none).
	note func(c *Config) string
	// mask hides secrets in a value before it is echoed in a message.
	mask func(v string) string
}

func (s *setting) quote(v string) string {
	if s.mask != nil {
		return s.mask(v)
	}
	return v
}

// settings lists every key in the order Effective prints them.
var settings = []*setting{
	str("listen", "OUTPRINT_LISTEN", "must be host:port, such as 127.0.0.1:8080", parseListen,
		func(c *Config) *string { return &c.Listen }),
	str("dataDir", "OUTPRINT_DATA_DIR", "must be a folder path", parseDir,
		func(c *Config) *string { return &c.DataDir }),
	withNote(withMask(str("database", "OUTPRINT_DATABASE", "must be sqlite://PATH or postgres://USER@HOST/DB", parseDatabase,
		func(c *Config) *string { return &c.Database }), maskDSN),
		func(c *Config) string {
			if _, set := c.origins["database"]; !set {
				return "derived from dataDir"
			}
			return ""
		}),
	withNote(str("store", "OUTPRINT_STORE", "must be file:///FOLDER or s3://BUCKET/PREFIX?endpoint=URL&region=REGION", parseStore,
		func(c *Config) *string { return &c.Store }),
		func(c *Config) string {
			if c.Store == "" {
				return "derived from dataDir"
			}
			if strings.HasPrefix(c.Store, "s3:") {
				return "credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
			}
			return ""
		}),
	integer("admission.slots", "OUTPRINT_ADMISSION_SLOTS", 1, 0, "must be a positive integer",
		func(c *Config) *int { return &c.Admission.Slots }),
	integer("admission.queueDepth", "OUTPRINT_ADMISSION_QUEUE_DEPTH", 0, 0, "must be zero or a positive integer",
		func(c *Config) *int { return &c.Admission.QueueDepth }),
	integer("admission.perUser", "OUTPRINT_ADMISSION_PER_USER", 1, 0, "must be a positive integer",
		func(c *Config) *int { return &c.Admission.PerUser }),
	duration("admission.maxWait", "OUTPRINT_ADMISSION_MAX_WAIT", false,
		func(c *Config) *time.Duration { return &c.Admission.MaxWait }),
	withNote(integer("admission.previewSlots", "OUTPRINT_ADMISSION_PREVIEW_SLOTS", 0, 0, "must be zero (one per two CPUs) or a positive integer",
		func(c *Config) *int { return &c.Admission.PreviewSlots }),
		func(c *Config) string {
			if c.Admission.PreviewSlots == 0 {
				return "0: page previews drawn at once, one per two CPUs, apart from the render slots"
			}
			return ""
		}),
	withNote(str("outline.url", "OUTPRINT_OUTLINE_URL", "must be an http or https URL such as https://wiki.example.com", parseOutlineURL,
		func(c *Config) *string { return &c.Outline.URL }),
		func(c *Config) string {
			if c.Outline.URL == "" {
				return "Outline off"
			}
			return ""
		}),
	{
		key: "images.allowHosts", env: "OUTPRINT_IMAGES_ALLOW_HOSTS",
		want: "must be a list of host names",
		list: parseAllowHost,
		setList: func(c *Config, v []string) {
			if len(v) == 0 {
				v = nil // an empty list is no list, as in the defaults
			}
			c.Images.AllowHosts = v
		},
		showNode: func(c *Config) *yaml.Node {
			n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, h := range c.Images.AllowHosts {
				n.Content = append(n.Content, strNode(h))
			}
			return n
		},
	},
	{
		key: "webhooks.allowHosts", env: "OUTPRINT_WEBHOOKS_ALLOW_HOSTS",
		want: "must be a list of host names",
		list: parseAllowHost,
		setList: func(c *Config, v []string) {
			if len(v) == 0 {
				v = nil
			}
			c.Webhooks.AllowHosts = v
		},
		showNode: func(c *Config) *yaml.Node {
			n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, h := range c.Webhooks.AllowHosts {
				n.Content = append(n.Content, strNode(h))
			}
			return n
		},
	},
	withNote(str("webhooks.publicUrl", "OUTPRINT_WEBHOOKS_PUBLIC_URL", "must be an http or https URL such as https://outprint.example.com", parsePublicURL,
		func(c *Config) *string { return &c.Webhooks.PublicURL }),
		func(c *Config) string {
			if c.Webhooks.PublicURL == "" {
				return "links use the Host of the request that submitted the job"
			}
			return ""
		}),
	{
		key: "auth.apiKeys", want: "must be a list of {user, tenant, sha256}",
		file:     decodeAPIKeys,
		showNode: showAPIKeys,
	},
	duration("jobs.ttl", "OUTPRINT_JOBS_TTL", false,
		func(c *Config) *time.Duration { return &c.Jobs.TTL }),
	integer("jobs.maxQueuedPerTenant", "OUTPRINT_JOBS_MAX_QUEUED_PER_TENANT", 1, 0, "must be a positive integer",
		func(c *Config) *int { return &c.Jobs.MaxQueuedPerTenant }),
	withNote(bytesSetting("jobs.maxStoredBytesPerTenant", "OUTPRINT_JOBS_MAX_STORED_BYTES_PER_TENANT", 1<<40,
		func(c *Config) *int64 { return &c.Jobs.MaxStoredBytesPerTenant }),
		func(c *Config) string { return formatBytes(c.Jobs.MaxStoredBytesPerTenant) }),
	duration("jobs.leaseTimeout", "OUTPRINT_JOBS_LEASE_TIMEOUT", false,
		func(c *Config) *time.Duration { return &c.Jobs.LeaseTimeout }),
	duration("render.timeout", "OUTPRINT_TIMEOUT", false,
		func(c *Config) *time.Duration { return &c.Render.Timeout }),
	integer("render.maxPages", "OUTPRINT_MAX_PAGES", 1, limits.DefaultMaxPages,
		fmt.Sprintf("must be an integer from 1 to %d (the page limit can only be lowered)", limits.DefaultMaxPages),
		func(c *Config) *int { return &c.Render.MaxPages }),
	withNote(bytesSetting("render.maxPdfBytes", "OUTPRINT_MAX_PDF_BYTES", limits.MaxPDFBytes,
		func(c *Config) *int64 { return &c.Render.MaxPDFBytes }),
		func(c *Config) string { return formatBytes(c.Render.MaxPDFBytes) }),
	integer("pool.min", "OUTPRINT_POOL_MIN", 0, 0, "must be zero or a positive integer",
		func(c *Config) *int { return &c.Pool.Min }),
	withNote(integer("pool.max", "OUTPRINT_POOL_MAX", 0, 0, "must be zero (derived from the machine) or a positive integer",
		func(c *Config) *int { return &c.Pool.Max }),
		func(c *Config) string {
			if c.Pool.Max == 0 {
				return "0: derived from the cgroup CPU and memory limits at startup"
			}
			return ""
		}),
	duration("pool.idleTimeout", "OUTPRINT_POOL_IDLE_TIMEOUT", false,
		func(c *Config) *time.Duration { return &c.Pool.IdleTimeout }),
	withNote(derivedBytesSetting("pool.memory", "OUTPRINT_POOL_MEMORY", 1<<40,
		func(c *Config) *int64 { return &c.Pool.Memory }),
		func(c *Config) string {
			if c.Pool.Memory == 0 {
				return "0: derived from the cgroup memory limit at startup"
			}
			return formatBytes(c.Pool.Memory)
		}),
	withNote(str("pool.formatsDir", "OUTPRINT_POOL_FORMATS_DIR", "must be a folder path", parseOptionalDir,
		func(c *Config) *string { return &c.Pool.FormatsDir }),
		func(c *Config) string {
			if c.Pool.FormatsDir == "" {
				return "derived from dataDir"
			}
			return ""
		}),
	withNote(boolean("diagrams.enabled", "OUTPRINT_DIAGRAMS_ENABLED",
		func(c *Config) *bool { return &c.Diagrams.Enabled }),
		func(c *Config) string {
			if !c.Diagrams.Enabled {
				return "mermaid and dot fences print as code"
			}
			return ""
		}),
	withNote(integer("diagrams.browsers", "OUTPRINT_DIAGRAMS_BROWSERS", 0, 0, "must be zero (one per render slot) or a positive integer",
		func(c *Config) *int { return &c.Diagrams.Browsers }),
		func(c *Config) string {
			if c.Diagrams.Browsers == 0 {
				return "0: one per render slot, started at the first Mermaid diagram"
			}
			return ""
		}),
	withNote(boolean("office.enabled", "OUTPRINT_OFFICE_ENABLED",
		func(c *Config) *bool { return &c.Office.Enabled }),
		func(c *Config) string {
			if !c.Office.Enabled {
				return "no LibreOffice runs; an Office document is refused (422)"
			}
			return ""
		}),
	duration("shutdown.grace", "OUTPRINT_SHUTDOWN_GRACE", true,
		func(c *Config) *time.Duration { return &c.Shutdown.Grace }),
	boolean("admin.allowAnonymous", "OUTPRINT_ADMIN_ALLOW_ANONYMOUS",
		func(c *Config) *bool { return &c.Admin.AllowAnonymous }),
	str("worker.listen", "OUTPRINT_WORKER_LISTEN", "must be host:port, such as 127.0.0.1:8090", parseListen,
		func(c *Config) *string { return &c.Worker.Listen }),
	withNote(integer("worker.capacity", "OUTPRINT_WORKER_CAPACITY", 0, 0, "must be zero (derived from the machine) or a positive integer",
		func(c *Config) *int { return &c.Worker.Capacity }),
		func(c *Config) string {
			if c.Worker.Capacity == 0 {
				return "0: derived from the cgroup CPU and memory limits at startup"
			}
			return ""
		}),
	{
		key: "gateway.workers", env: "OUTPRINT_GATEWAY_WORKERS",
		want: "must be a list of worker URLs such as http://worker:8090",
		list: parseWorkerURL,
		setList: func(c *Config, v []string) {
			if len(v) == 0 {
				v = nil
			}
			c.Gateway.Workers = v
		},
		showNode: func(c *Config) *yaml.Node {
			n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, h := range c.Gateway.Workers {
				n.Content = append(n.Content, strNode(h))
			}
			return n
		},
	},
	withMask(&setting{
		key: "cluster.secret", env: "OUTPRINT_CLUSTER_SECRET", want: "must be at least 16 characters",
		scalar: func(c *Config, v string) string {
			if v != "" && len(v) < 16 {
				return "must be at least 16 characters"
			}
			c.Cluster.Secret = v
			return ""
		},
		show: func(c *Config) string {
			if c.Cluster.Secret == "" {
				return ""
			}
			return "xxxxx"
		},
	}, func(v string) string {
		if v == "" {
			return ""
		}
		return "xxxxx"
	}),
}

// findKey returns the setting of a file key, or nil. The table is small;
// a linear search keeps it the single source of truth.
func findKey(key string) *setting {
	for _, s := range settings {
		if s.key == key {
			return s
		}
	}
	return nil
}

// findEnv returns the setting of an OUTPRINT_* variable, or nil.
func findEnv(name string) *setting {
	for _, s := range settings {
		if s.env != "" && s.env == name {
			return s
		}
	}
	return nil
}

// isGroup reports whether key holds a mapping of further keys
// ("admission").
func isGroup(key string) bool {
	for _, s := range settings {
		if strings.HasPrefix(s.key, key+".") {
			return true
		}
	}
	return false
}

// EnvVars returns every OUTPRINT_* variable Load accepts: EnvConfig
// first, then the settings in table order.
func EnvVars() []string {
	return append([]string{EnvConfig}, envNames()...)
}

func envNames() []string {
	var out []string
	for _, s := range settings {
		if s.env != "" {
			out = append(out, s.env)
		}
	}
	return out
}

func parent(key string) string {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[:i]
	}
	return ""
}

// children returns the names directly under group prefix ("" = the root).
func children(prefix string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(full string) {
		if parent(full) != prefix {
			return
		}
		name := full[strings.LastIndexByte(full, '.')+1:]
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, s := range settings {
		add(s.key)
		for p := parent(s.key); p != ""; p = parent(p) {
			add(p)
		}
	}
	return out
}

// Constructors of table entries.

func str(key, env, want string, parse func(string) (string, string), field func(*Config) *string) *setting {
	return &setting{
		key: key, env: env, want: want,
		scalar: func(c *Config, v string) string {
			got, reason := parse(v)
			if reason != "" {
				return reason
			}
			*field(c) = got
			return ""
		},
		show: func(c *Config) string { return *field(c) },
	}
}

func withMask(s *setting, mask func(string) string) *setting { s.mask = mask; return s }

func withNote(s *setting, note func(*Config) string) *setting { s.note = note; return s }

// integer accepts min ≤ n, and n ≤ max when max > 0.
func integer(key, env string, min, max int, want string, field func(*Config) *int) *setting {
	return &setting{
		key: key, env: env, want: want,
		scalar: func(c *Config, v string) string {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < min || (max > 0 && n > max) {
				return want
			}
			*field(c) = n
			return ""
		},
		show: func(c *Config) string { return strconv.Itoa(*field(c)) },
	}
}

func duration(key, env string, zeroOK bool, field func(*Config) *time.Duration) *setting {
	want := "must be a positive duration such as 30s, 5m or 1h"
	if zeroOK {
		want = "must be zero or a positive duration such as 30s, 5m or 1h"
	}
	return &setting{
		key: key, env: env, want: want,
		scalar: func(c *Config, v string) string {
			v = strings.TrimSpace(v)
			d, err := time.ParseDuration(v)
			if v == "0" && zeroOK {
				d, err = 0, nil
			}
			if err != nil || d < 0 || (d == 0 && !zeroOK) {
				return want
			}
			*field(c) = d
			return ""
		},
		show: func(c *Config) string { return formatDuration(*field(c)) },
	}
}

// boolean accepts true or false (YAML 1.2's spelling; yes/no/on/off are
// refused, as a typo would be).
func boolean(key, env string, field func(*Config) *bool) *setting {
	want := "must be true or false"
	return &setting{
		key: key, env: env, want: want,
		scalar: func(c *Config, v string) string {
			switch strings.TrimSpace(v) {
			case "true":
				*field(c) = true
			case "false":
				*field(c) = false
			default:
				return want
			}
			return ""
		},
		show: func(c *Config) string { return strconv.FormatBool(*field(c)) },
		showNode: func(c *Config) *yaml.Node {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(*field(c))}
		},
	}
}

// parseBool reads a YAML true or false.
func parseBool(n *yaml.Node) (v, ok bool) {
	switch n.Value {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// bytesSetting accepts a byte count from 1 to max, plain or with a KiB or
// MiB suffix.
func bytesSetting(key, env string, max int64, field func(*Config) *int64) *setting {
	want := fmt.Sprintf("must be a size from 1 byte to %d (%s), in bytes or with KiB, MiB or GiB", max, formatBytes(max))
	return &setting{
		key: key, env: env, want: want,
		scalar: func(c *Config, v string) string {
			n, ok := parseBytes(v)
			if !ok || n < 1 || n > max {
				return want
			}
			*field(c) = n
			return ""
		},
		show: func(c *Config) string { return strconv.FormatInt(*field(c), 10) },
	}
}

// derivedBytesSetting is bytesSetting that also takes 0: derived at
// startup (what `config check` prints for it must load again).
func derivedBytesSetting(key, env string, max int64, field func(*Config) *int64) *setting {
	s := bytesSetting(key, env, max, field)
	s.want = fmt.Sprintf("must be zero (derived from the machine) or a size up to %d (%s), in bytes or with KiB, MiB or GiB", max, formatBytes(max))
	s.scalar = func(c *Config, v string) string {
		n, ok := parseBytes(v)
		if !ok || n < 0 || n > max {
			return s.want
		}
		*field(c) = n
		return ""
	}
	return s
}

// Parsers. Each returns the value to store, or a reason why v is refused.

func parseListen(v string) (string, string) {
	const want = "must be host:port, such as 127.0.0.1:8080"
	host, port, err := net.SplitHostPort(strings.TrimSpace(v))
	if err != nil {
		return "", want
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return "", "must be host:port with a port from 0 to 65535"
	}
	if host != "" && net.ParseIP(host) == nil && !validHostname(host) {
		return "", want
	}
	return strings.TrimSpace(v), ""
}

func parseDir(v string) (string, string) {
	v = strings.TrimSpace(v)
	if v == "" || strings.ContainsRune(v, 0) {
		return "", "must be a folder path"
	}
	return v, ""
}

// parseOptionalDir is parseDir where empty means the default, as
// `config check` prints a derived folder.
func parseOptionalDir(v string) (string, string) {
	if strings.TrimSpace(v) == "" {
		return "", ""
	}
	return parseDir(v)
}

func parseDatabase(v string) (string, string) {
	const want = "must be sqlite://PATH or postgres://USER@HOST/DB"
	v = strings.TrimSpace(v)
	if p, ok := strings.CutPrefix(v, "sqlite://"); ok {
		if p == "" || strings.ContainsRune(p, 0) {
			return "", want
		}
		return v, ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return "", want
	}
	return v, ""
}

// parseStore accepts the locations location.Parse does and keeps their
// canonical form; "" means the data folder.
func parseStore(v string) (string, string) {
	if strings.TrimSpace(v) == "" {
		return "", ""
	}
	loc, err := location.Parse(v)
	if err != nil {
		return "", err.Error()
	}
	return loc.String(), ""
}

// parseWorkerURL accepts a worker's base URL: http or https, a host and
// port, no user, path, query or fragment.
func parseWorkerURL(v string) (string, string) {
	const want = "must be a worker URL such as http://worker:8090 (scheme, host and port only)"
	v = strings.TrimRight(strings.TrimSpace(v), "/")
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", want
	}
	return v, ""
}

func parseOutlineURL(v string) (string, string) {
	const want = "must be an http or https URL such as https://wiki.example.com"
	v = strings.TrimSpace(v)
	if v == "" {
		return "", "" // Outline off
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "", want
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return "", "must be Outline's base URL, without user, query or fragment"
	}
	return strings.TrimRight(v, "/"), ""
}

// parseAllowHost accepts "example.com", "example.com:8443",
// "*.example.com", IP addresses and "[::1]:8443", as the fetch package
// matches them.
func parseAllowHost(v string) (string, string) {
	const want = "must be a host name such as images.example.com, example.com:8443 or *.example.com, without scheme or path"
	h := strings.ToLower(strings.TrimSpace(v))
	if h == "" || strings.ContainsAny(h, "/?#@ \t") {
		return "", want
	}
	host := h
	if hh, port, err := net.SplitHostPort(h); err == nil {
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return "", want
		}
		host = hh
	} else if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
		return "", want
	}
	host = strings.TrimSuffix(host, ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return h, ""
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		host = rest
	}
	if !validHostname(host) {
		return "", want
	}
	return h, ""
}

var labelRE = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)

func validHostname(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if !labelRE.MatchString(l) {
			return false
		}
	}
	return true
}

// parseBytes reads "52428800", "50MiB", "512 KiB" or "10B".
func parseBytes(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, false
	}
	return n * mult, true
}

func formatBytes(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// formatDuration writes whole hours as "1h", whole minutes above one as
// "5m", whole seconds as "60s", and anything else as time.Duration does.
func formatDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0 && d > time.Minute:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// maskDSN hides a password in a database URL, in its user part or a
// password parameter.
func maskDSN(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "sqlite" {
		return v
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// validName accepts a user or tenant id: 1 to 128 bytes, no control
// characters.
func validName(v string) bool {
	if v == "" || len(v) > 128 {
		return false
	}
	for _, r := range v {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return false
		}
	}
	return true
}

// suggest returns the candidate closest to name: equal but for case, or
// within an edit distance of about a third of its length. "" when none is
// close.
func suggest(name string, candidates []string) string {
	best, bestDist := "", 1<<30
	for _, c := range candidates {
		if strings.EqualFold(c, name) {
			return c
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist <= max(2, len(name)/4) {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
