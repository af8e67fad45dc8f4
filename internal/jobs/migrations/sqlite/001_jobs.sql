-- SQLite form of ../postgres/001_jobs.sql: uuids and times as text (times
-- in fixed-width UTC, see sqliteTime), booleans as integers.
-- The public record of each job: state, progress and error as the API shows
-- them. River's river_job row is the queue's private bookkeeping; this row
-- is what clients see, and it outlives River's retention of finished jobs.
CREATE TABLE outprint_jobs (
    id                  text PRIMARY KEY,
    tenant              text NOT NULL,
    user_id             text NOT NULL,
    name                text NOT NULL DEFAULT '',
    state               text NOT NULL CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    phase               text NOT NULL DEFAULT '',
    pages               integer NOT NULL DEFAULT 0,
    attempts            integer NOT NULL DEFAULT 0,
    max_attempts        integer NOT NULL,
    error_code          text NOT NULL DEFAULT '',
    error_message       text NOT NULL DEFAULT '',
    last_error          text NOT NULL DEFAULT '',
    source              text NOT NULL CHECK (source IN ('markdown', 'outline')),
    outline_document_id text NOT NULL DEFAULT '',
    digest              text NOT NULL,
    -- What the stored input holds (file name, metadata present, asset
    -- names and keys, Outline source): JSON, a few hundred bytes. It is
    -- committed with the row, after the files it names are durable.
    input_manifest      text NOT NULL DEFAULT '',
    river_job_id        integer,
    created_at          text NOT NULL,
    started_at          text,
    finished_at         text,
    heartbeat_at        text,
    expires_at          text NOT NULL,
    files_deleted       integer NOT NULL DEFAULT 0
);

CREATE INDEX outprint_jobs_tenant_created ON outprint_jobs (tenant, created_at);
CREATE INDEX outprint_jobs_tenant_user_created ON outprint_jobs (tenant, user_id, created_at);
CREATE INDEX outprint_jobs_state_created ON outprint_jobs (state, created_at);
CREATE INDEX outprint_jobs_expires ON outprint_jobs (expires_at) WHERE files_deleted = 0;

-- Idempotency keys, scoped to the tenant, with the digest of the request
-- they were first used with.
CREATE TABLE outprint_idempotency (
    tenant         text NOT NULL,
    key            text NOT NULL,
    request_digest text NOT NULL,
    job_id         text NOT NULL,
    created_at     text NOT NULL,
    PRIMARY KEY (tenant, key)
);

CREATE INDEX outprint_idempotency_job ON outprint_idempotency (job_id);
