package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/outprint/outprint/internal/config"
	"github.com/outprint/outprint/internal/markdown"
	"github.com/outprint/outprint/internal/metrics"
	"github.com/outprint/outprint/internal/render"
	"github.com/outprint/outprint/internal/script"
	"github.com/outprint/outprint/internal/tex"
)

// probeRetry is how often a failed TeX probe is tried again.
const probeRetry = 30 * time.Second

// engine is the TeX engine the process renders with, and what the service needs
// from it besides Run: pool figures for /metrics and a close at exit.
type engine struct {
	render.Engine
	name  string
	stats func() metrics.PoolStats
	// pool is what /readyz asks whether the engine can render now.
	pool readiness
	// close stops every TeX process the engine keeps; Close calls it after
	// the HTTP server and admission drained, so no render is cut off by it
	// unless the shutdown is forced.
	close func()
}

// poolClose bounds the pool's Close: by then no render holds a process, so
// it only stops idle and warming ones.
const poolClose = 10 * time.Second

// newEngine returns the warm pool (SPEC §7), sized by the pool settings, with the
// usual profile (A4, Latin) warmed ahead of the first request; other
// profiles get warm processes from their first render on. formats, when
// not nil, keeps the pool's formats (Options.Formats).
func newEngine(cfg *config.Config, tmp string, formats *tex.Formats) (*engine, error) {
	pc := poolConfig(cfg)
	pc.Formats = formats
	lim := cfg.Render.Limits()
	pc.Runner = tex.RunnerConfig{TempDir: tmp, Timeout: lim.Timeout, MaxPDFBytes: lim.MaxPDFBytes}
	pc.Preambles = []string{markdown.Preamble(markdown.Profile{Paper: "a4", Scripts: script.Of("Latin")})}
	pool, err := tex.NewPool(pc)
	if err != nil {
		return nil, err
	}
	return &engine{
		Engine: pool,
		name:   "warm pool",
		pool:   pool,
		stats: func() metrics.PoolStats {
			st := pool.Stats()
			return metrics.PoolStats{
				Warm: st.Warm, Busy: st.Busy, Warming: st.Warming, Started: uint64(st.Started),
				Replaced: uint64(st.Replaced), Failures: uint64(st.Failures),
				Zygotes: st.Zygotes, ZygoteForks: uint64(st.Forked),
				ZygotesRetired: uint64(st.ZygotesRetired), Zygote: st.ZygoteOff == "",
			}
		},
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), poolClose)
			defer cancel()
			// Its only error is poolClose running out, after which the
			// busy renders were canceled and waited for: nothing is left.
			_ = pool.Close(ctx)
		},
	}, nil
}

// texProbe is the outcome of rendering a tiny document at startup.
type texProbe struct {
	mu      sync.Mutex
	done    bool
	failure error
}

var errProbing = errors.New("the TeX probe is still running")

// err returns nil once the probe passed, errProbing while it runs, and
// the probe's failure after it failed.
func (p *texProbe) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.done:
		return nil
	case p.failure != nil:
		return p.failure
	}
	return errProbing
}

// run renders a one-line document through the whole pipeline, again every
// probeRetry until it passes or ctx ends.
func (p *texProbe) run(ctx context.Context, pl *render.Pipeline, log *slog.Logger) {
	for {
		start := time.Now()
		_, err := pl.Do(ctx, render.Request{Name: "probe.md", Markdown: []byte("# outprint\n\nready\n")}, nil)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.done, p.failure = err == nil, err
		p.mu.Unlock()
		if err == nil {
			log.Info("TeX probe passed", "duration_ms", time.Since(start).Milliseconds())
			return
		}
		log.Error("TeX probe failed; /readyz answers 503 until it passes", "err", err, "retry", probeRetry.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(probeRetry):
		}
	}
}

// readiness is an engine's own view of whether it can work now: the TeX
// pool's (its warm-ups succeed), and the Office and diagram pools' as they
// come. /readyz asks each, through a readyCache, every time it is called.
type readiness interface {
	Ready(ctx context.Context) error
}

// readyCacheFor is how long a readiness answer is reused: /readyz, the
// metrics scrape and every gateway probing a worker may call it several
// times a second, and a pool's answer changes no faster than its warm-ups.
const readyCacheFor = time.Second

// readyCache asks a pool whether it is ready at most once per
// readyCacheFor. It is safe for concurrent use.
type readyCache struct {
	name string // what the error names: "TeX pool"
	pool readiness
	now  func() time.Time

	mu  sync.Mutex
	at  time.Time
	err error
}

func newReadyCache(name string, pool readiness) *readyCache {
	return &readyCache{name: name, pool: pool, now: time.Now}
}

// ready returns the pool's answer, at most readyCacheFor old. An answer
// cut off by ctx is not kept.
func (c *readyCache) ready(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); !c.at.IsZero() && now.Sub(c.at) < readyCacheFor && !now.Before(c.at) {
		return c.err
	}
	err := c.pool.Ready(ctx)
	if err != nil {
		err = fmt.Errorf("%s: %w", c.name, err)
	}
	if ctx.Err() != nil {
		return err
	}
	c.at, c.err = c.now(), err
	return err
}
