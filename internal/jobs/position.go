package jobs

import (
	"context"
	"fmt"
)

// QueuePosition returns how many queued jobs were accepted before job and
// wait with it: 1 means it is next. Jobs are claimed in the order they were
// accepted (River's queue is FIFO within a priority, and outprint inserts
// every job at one priority), so the count is the job's place in line. A
// job that is not queued has position 0.
func (s *Service) QueuePosition(ctx context.Context, job Job) (int, error) {
	if job.State != StateQueued {
		return 0, nil
	}
	var n int
	err := s.db.pool().queryRow(ctx,
		`SELECT count(*) FROM outprint_jobs WHERE state = 'queued' AND (created_at < $1 OR (created_at = $1 AND id < $2))`,
		job.CreatedAt, job.ID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("queue position of %s: %w", job.ID, err)
	}
	return n + 1, nil
}
