-- Per-tenant quotas (jobs.maxQueuedPerTenant, jobs.maxStoredBytesPerTenant):
-- the bytes a job keeps in the store, its input at acceptance plus its
-- result once stored, and indexes for counting a tenant's queued jobs and
-- kept bytes at every acceptance.
ALTER TABLE outprint_jobs ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0;
CREATE INDEX outprint_jobs_tenant_active ON outprint_jobs (tenant) WHERE state IN ('queued', 'running');
CREATE INDEX outprint_jobs_tenant_kept ON outprint_jobs (tenant) WHERE NOT files_deleted;
