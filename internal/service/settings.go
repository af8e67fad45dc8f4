package service

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/outprint/outprint/internal/admission"
	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/jobs"
	"github.com/outprint/outprint/internal/tex"
	"github.com/outprint/outprint/internal/worker"
)

// Defaults of the process itself; every other setting's default is a
// constant of the package that owns it (admission, jobs, limits, tex),
// filled by that package's WithDefaults. A configuration leaves a setting
// zero to take it (package config).
const (
	// DefaultListen is where serve and gateway listen: loopback, so that
	// the anonymous mode of a fresh install is reachable from this machine
	// only.
	DefaultListen = "127.0.0.1:8080"
	// DefaultWorkerListen is where a worker listens for gateways.
	DefaultWorkerListen = "127.0.0.1:8090"
	// DefaultDataDir holds the embedded database, job inputs and results.
	DefaultDataDir = "./outprint-data"
	// DefaultGrace is how long running renders may finish after SIGTERM.
	DefaultGrace = 30 * time.Second
)

// The settings of cfg as the process uses them: unset ones at their
// defaults. Each reads one setting (or one group) and nothing else.

func listenAddr(cfg *config.Config) string { return or(cfg.Listen, DefaultListen) }

func workerListenAddr(cfg *config.Config) string { return or(cfg.Worker.Listen, DefaultWorkerListen) }

func dataDir(cfg *config.Config) string { return or(cfg.DataDir, DefaultDataDir) }

// formatsDir is cfg.Pool.FormatsDir, or the formats folder in the data
// folder.
func formatsDir(cfg *config.Config) string {
	return or(cfg.Pool.FormatsDir, filepath.Join(dataDir(cfg), "formats"))
}

// databaseURL is cfg.Database, or the SQLite file in the data folder.
func databaseURL(cfg *config.Config) string {
	return or(cfg.Database, "sqlite://"+strings.TrimSuffix(dataDir(cfg), "/")+"/outprint.db")
}

// databaseDriver splits the database URL into the driver ("sqlite" or
// "postgres") and what that driver opens: the file path for SQLite, the
// whole URL for PostgreSQL.
func databaseDriver(cfg *config.Config) (driver, dsn string) {
	db := databaseURL(cfg)
	if p, ok := strings.CutPrefix(db, "sqlite://"); ok {
		return "sqlite", p
	}
	return "postgres", db
}

// shutdownGrace is shutdown.grace: zero when the operator set zero.
func shutdownGrace(cfg *config.Config) time.Duration {
	if cfg.Shutdown.Grace == 0 && !cfg.Set("shutdown.grace") {
		return DefaultGrace
	}
	return cfg.Shutdown.Grace
}

// admissionConfig is the admission of serve and gateway. QueueDepth and
// MaxWait have a meaning at zero in package admission, so their defaults
// are taken here from its constants when the operator set nothing.
func admissionConfig(cfg *config.Config) admission.Config {
	c := admission.Config{
		Slots: cfg.Admission.Slots, QueueDepth: cfg.Admission.QueueDepth, PerUser: cfg.Admission.PerUser,
		MaxWait: cfg.Admission.MaxWait, RenderLimit: cfg.Render.Limits().Timeout,
	}
	if !cfg.Set("admission.queueDepth") {
		c.QueueDepth = admission.DefaultQueueDepth
	}
	if c.MaxWait == 0 {
		c.MaxWait = admission.DefaultMaxWait
	}
	return c.WithDefaults()
}

// previewSlots is how many page previews a process draws at once, apart
// from its render slots (admission.previewSlots; by default one per two
// CPUs). Every role makes the pool; serve and gateway draw previews.
func previewSlots(cfg *config.Config) int {
	if n := cfg.Admission.PreviewSlots; n > 0 {
		return n
	}
	return worker.DefaultPreviewSlots(runtime.NumCPU())
}

// workerAdmission is a worker's: one capacity for renders sent by
// gateways and queued jobs; a full worker answers busy at once (no queue):
// the gateways queue, and move on to another worker.
func workerAdmission(cfg *config.Config) admission.Config {
	capacity := cfg.Worker.Capacity
	if capacity == 0 {
		capacity = tex.DefaultCapacity()
	}
	c := admissionConfig(cfg)
	c.Slots, c.QueueDepth, c.PerUser = capacity, 0, capacity
	return c
}

// poolConfig is the warm pool's sizing (its Runner and Preambles are the
// engine's).
func poolConfig(cfg *config.Config) tex.PoolConfig {
	c := tex.PoolConfig{Min: cfg.Pool.Min, Max: cfg.Pool.Max, IdleTimeout: cfg.Pool.IdleTimeout, Memory: cfg.Pool.Memory,
		FormatStore: formatsDir(cfg)}
	if c.Min == 0 && cfg.Set("pool.min") {
		c.Min = -1 // none: package tex's way of saying zero
	}
	return c
}

// jobsConfig is the job service's settings from the file; the service
// adds what the process wires (renderer, budget, observers).
func jobsConfig(cfg *config.Config) jobs.Config {
	return jobs.Config{
		TTL:                     cfg.Jobs.TTL,
		MaxQueuedPerTenant:      cfg.Jobs.MaxQueuedPerTenant,
		MaxStoredBytesPerTenant: cfg.Jobs.MaxStoredBytesPerTenant,
		LeaseTimeout:            cfg.Jobs.LeaseTimeout,
		// Room beyond the render limit for converting images and
		// storing the result.
		JobTimeout: cfg.Render.Limits().Timeout + time.Minute,
	}
}

// Effective returns cfg with every setting it leaves unset at the value
// the process will use, taken from the packages' defaults: what `outprint
// config check` prints. Settings derived at startup from the machine
// (pool.max, worker.capacity) stay 0, as the file would say.
func Effective(cfg *config.Config) *config.Config {
	e := *cfg
	e.Listen, e.DataDir, e.Database = listenAddr(cfg), dataDir(cfg), databaseURL(cfg)
	e.Worker.Listen = workerListenAddr(cfg)
	e.Shutdown.Grace = shutdownGrace(cfg)
	adm := admissionConfig(cfg)
	// previewSlots stays as set: its default depends on the machine, and
	// config check says so.
	e.Admission = config.Admission{Slots: adm.Slots, QueueDepth: adm.QueueDepth, PerUser: adm.PerUser, MaxWait: adm.MaxWait,
		PreviewSlots: cfg.Admission.PreviewSlots}
	j := jobsConfig(cfg).WithDefaults()
	e.Jobs = config.Jobs{TTL: j.TTL, MaxQueuedPerTenant: j.MaxQueuedPerTenant, MaxStoredBytesPerTenant: j.MaxStoredBytesPerTenant,
		LeaseTimeout: j.LeaseTimeout}
	lim := cfg.Render.Limits()
	e.Render = config.Render{Timeout: lim.Timeout, MaxPages: lim.MaxPages, MaxPDFBytes: lim.MaxPDFBytes}
	pool := poolConfig(cfg).WithDefaults()
	e.Pool.Min, e.Pool.IdleTimeout = max(pool.Min, 0), pool.IdleTimeout
	e.Diagrams.Enabled = diagramsEnabled(cfg)
	e.Office.Enabled = officeEnabled(cfg)
	return &e
}

// CheckRole refuses a configuration the role cannot run on. New calls it;
// the command calls it first to print the refusal without a log line.
func CheckRole(role Role, cfg *config.Config) error {
	switch role {
	case RoleServe, "":
		return checkListen(cfg)
	case RoleGateway, RoleWorker:
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	if driver, _ := databaseDriver(cfg); driver != "postgres" {
		return fmt.Errorf("database (OUTPRINT_DATABASE): the %s role needs PostgreSQL, shared by gateways and workers (got %s)", role, driver)
	}
	if cfg.Cluster.Secret == "" {
		return fmt.Errorf("cluster.secret (OUTPRINT_CLUSTER_SECRET): the %s role needs the cluster secret", role)
	}
	if role == RoleGateway {
		if len(cfg.Gateway.Workers) == 0 {
			return errors.New("gateway.workers (OUTPRINT_GATEWAY_WORKERS): a gateway needs at least one worker URL")
		}
		return checkListen(cfg)
	}
	return nil
}

// checkListen refuses a listen address other than loopback in anonymous
// mode, where anyone who reaches the port could render.
func checkListen(cfg *config.Config) error {
	if !cfg.Anonymous() {
		return nil
	}
	listen := listenAddr(cfg)
	from := ""
	if o := cfg.Origin("listen"); o != "" {
		from = " (from " + o + ")"
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("listen %q%s is not host:port", listen, from)
	}
	if isLoopback(host) {
		return nil
	}
	return fmt.Errorf("listen %s%s is not a loopback address, and with no API keys (auth.apiKeys) and no Outline (outline.url) "+
		"configured anyone who reaches it could render anonymously: set listen (OUTPRINT_LISTEN) to a loopback "+
		"address such as 127.0.0.1:%s, or configure API keys or Outline", listen, from, port)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
