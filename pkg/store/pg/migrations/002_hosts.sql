-- The hosts registry (SPEC §11.7 "Host loss"): each host renews its row.
-- renewed_at is the server's clock, so a host's age never compares two
-- hosts' clocks.
CREATE TABLE hosts (
    host_id    text        PRIMARY KEY,
    started_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL DEFAULT now(),
    version    text        NOT NULL
);
