package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"riverqueue.com/riverui"
)

// Console is River's own web console (riverui) for this service's queue:
// River's tables only (jobs, queues, states), never outprint_jobs. Its job
// arguments are {"job_id": …} and nothing else (renderArgs), and the error
// River records for a job that failed on its document names only the
// failure's code (worker.go, riverError), so what the console shows holds
// no document text and no Outline cookie.
//
// It is an http.Handler that expects the whole path, prefix included (it
// strips the prefix itself). Callers authenticate before it: riverui has
// no access control of its own.
type Console struct {
	h *riverui.Handler
}

// Console returns the console served under prefix (e.g. "/admin/river").
// It starts riverui's background services (count caches) and stops them
// when ctx ends; the caller owns ctx.
func (s *Service) Console(ctx context.Context, prefix string, log *slog.Logger) (*Console, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h, err := s.q.console(prefix, log)
	if err != nil {
		return nil, fmt.Errorf("river console: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		return nil, fmt.Errorf("river console: %w", err)
	}
	return &Console{h: h}, nil
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.h.ServeHTTP(w, r) }

func (b *riverBackend[TTx, TDriver]) console(prefix string, log *slog.Logger) (*riverui.Handler, error) {
	return riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(b.client, nil),
		Logger:    log,
		Prefix:    prefix,
	})
}
