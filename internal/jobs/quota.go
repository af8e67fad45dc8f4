package jobs

import (
	"context"
	"errors"
	"fmt"
)

// Defaults of the per-tenant quotas (Config.MaxQueuedPerTenant and
// Config.MaxStoredBytesPerTenant). Acceptance is cheap, so without them
// one tenant could queue jobs for hours of rendering or fill the disk: six
// jobs put 301 MB on disk in 4 s (issue 10). A thousand jobs is hours of
// work for a few slots; 2 GiB is forty of the largest inputs with their
// results.
const (
	DefaultMaxQueuedPerTenant      = 1000
	DefaultMaxStoredBytesPerTenant = 2 << 30
)

// ErrQuota is the sentinel of a *QuotaError.
var ErrQuota = errors.New("tenant quota reached")

// QuotaError is a submission refused because its tenant has reached a
// quota. Queued is true for the queued-jobs quota (the tenant must wait
// for its jobs to run), false for the stored-bytes quota (it must wait for
// results to expire or fetch and forget them).
type QuotaError struct {
	Queued bool
	Limit  int64 // the quota that was reached
	Used   int64 // what the tenant has
}

func (e *QuotaError) Error() string {
	if e.Queued {
		return fmt.Sprintf("%v: %d jobs queued or running, at most %d", ErrQuota, e.Used, e.Limit)
	}
	return fmt.Sprintf("%v: %d bytes stored, at most %d", ErrQuota, e.Used, e.Limit)
}

func (e *QuotaError) Unwrap() error { return ErrQuota }

// CheckQuota reports whether tenant may submit one more job of about
// incoming bytes: nil, or a *QuotaError. It is meant to run before the
// request body is read (incoming is then what the client declared, or 0).
// The check and the insert are not one transaction, so submissions of one
// tenant that run at the same moment can pass a quota by as many as run
// at once (at most admission.perUser per user).
func (s *Service) CheckQuota(ctx context.Context, tenant string, incoming int64) error {
	var queued, stored int64
	err := s.db.pool().queryRow(ctx, `SELECT
		COALESCE(SUM(CASE WHEN state IN ('queued', 'running') THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN NOT files_deleted THEN stored_bytes ELSE 0 END), 0)
		FROM outprint_jobs WHERE tenant = $1 AND (state IN ('queued', 'running') OR NOT files_deleted)`,
		tenant).Scan(&queued, &stored)
	if err != nil {
		return fmt.Errorf("quota of %s: %w", tenant, err)
	}
	if queued >= int64(s.cfg.MaxQueuedPerTenant) {
		return &QuotaError{Queued: true, Limit: int64(s.cfg.MaxQueuedPerTenant), Used: queued}
	}
	if stored+max(incoming, 0) > s.cfg.MaxStoredBytesPerTenant {
		return &QuotaError{Limit: s.cfg.MaxStoredBytesPerTenant, Used: stored}
	}
	return nil
}

// inputBytes is what an input keeps in the store.
func inputBytes(in Input) int64 {
	n := int64(len(in.Markdown) + len(in.Metadata))
	if in.Office != nil {
		n += int64(len(in.Office.Doc))
	}
	for _, b := range in.Assets {
		n += int64(len(b))
	}
	return n
}

// addStoredBytes counts a stored result against its job's tenant. A crash
// between the store and this update leaves the result uncounted, which
// errs on the tenant's side.
func (s *Service) addStoredBytes(ctx context.Context, id string, n int) error {
	_, err := s.db.pool().exec(ctx, `UPDATE outprint_jobs SET stored_bytes = stored_bytes + $2 WHERE id = $1`, id, n)
	return err
}
