-- SQLite form of ../postgres/002_webhooks.sql: uuids and times as text.
CREATE TABLE outprint_webhooks (
    job_id          text PRIMARY KEY,
    url             text NOT NULL,
    base_url        text NOT NULL,
    state           text NOT NULL CHECK (state IN ('pending', 'sending', 'retrying', 'delivered', 'dead')),
    attempts        integer NOT NULL DEFAULT 0,
    last_status     integer,
    last_error      text NOT NULL DEFAULT '',
    created_at      text NOT NULL,
    settled_at      text,
    next_attempt_at text,
    finished_at     text
);
