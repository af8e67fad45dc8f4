package jobs

import (
	"context"
	"log/slog"
)

// riverLogger is the logger River gets: the service's, from Warn up.
// River logs its own bookkeeping at Info (every producer's job counts
// every few seconds, "River client started"), which says nothing an
// operator acts on and would fill a quiet server's log; its warnings and
// errors (a failing fetch, a lost leadership) still reach the log.
func riverLogger(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{min: slog.LevelWarn, h: l.Handler()})
}

// minLevel is a handler that drops records below min.
type minLevel struct {
	min slog.Level
	h   slog.Handler
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}

func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{min: m.min, h: m.h.WithAttrs(as)}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{min: m.min, h: m.h.WithGroup(name)}
}
