-- Leases (lease.go): a running job's heartbeat_at is its lease. When the
-- leader takes an expired lease back it gives the job a new River job and
-- keeps the attempts used so far in attempt_base, so the row's attempts
-- count on across River jobs: attempts = attempt_base + River's attempt.
-- Every write of an attempt names (river_job_id, attempts), so a write of
-- an attempt whose lease was taken back matches no row.
ALTER TABLE outprint_jobs ADD COLUMN attempt_base integer NOT NULL DEFAULT 0;

CREATE INDEX outprint_jobs_running_heartbeat ON outprint_jobs (heartbeat_at) WHERE state = 'running';
