-- The callback of a job (issue 16) and the state of its delivery. A row is
-- written with the job at acceptance (state pending) and moved to sending
-- in the transaction that settles the job, the same one that inserts the
-- River job delivering it; the worker records every attempt here, which is
-- what GET /v1/jobs/{id} shows as "webhook". The signing secrets are not
-- stored: they are looked up in the configuration at each attempt, so that
-- a rotated secret takes effect for deliveries still retrying.
CREATE TABLE outprint_webhooks (
    job_id          uuid PRIMARY KEY,
    url             text NOT NULL,
    -- The scheme and host the job's links are made absolute with
    -- (webhooks.publicUrl, or the accepting request's).
    base_url        text NOT NULL,
    state           text NOT NULL CHECK (state IN ('pending', 'sending', 'retrying', 'delivered', 'dead')),
    attempts        integer NOT NULL DEFAULT 0,
    -- HTTP status of the last attempt; NULL before one, and when it got
    -- no answer (network error, timeout, refused address).
    last_status     integer,
    last_error      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    settled_at      timestamptz,
    next_attempt_at timestamptz,
    finished_at     timestamptz
);
