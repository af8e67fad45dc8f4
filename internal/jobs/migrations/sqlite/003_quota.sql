-- SQLite form of ../postgres/003_quota.sql.
ALTER TABLE outprint_jobs ADD COLUMN stored_bytes integer NOT NULL DEFAULT 0;
CREATE INDEX outprint_jobs_tenant_active ON outprint_jobs (tenant) WHERE state IN ('queued', 'running');
CREATE INDEX outprint_jobs_tenant_kept ON outprint_jobs (tenant) WHERE files_deleted = 0;
