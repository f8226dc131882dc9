-- Queue documents: one row per (queue, id), its state a column, so an id
-- lives in exactly one state and put-once is the primary key.
CREATE TABLE docs (
    queue      text        NOT NULL,
    id         text        NOT NULL,
    state      text        NOT NULL,
    prio       smallint    NOT NULL,
    priority   text        NOT NULL,
    created_at timestamptz NOT NULL,
    data       bytea       NOT NULL,
    reason     text,
    holder     text,
    attempt    integer,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, id)
);
CREATE INDEX docs_order ON docs (queue, state, prio, created_at, id);

-- Every external event id ever admitted.
CREATE TABLE seen (
    id          text PRIMARY KEY,
    admitted_at timestamptz NOT NULL DEFAULT now()
);

-- The event log. xid is the writing transaction: readers deliver a row only
-- once every transaction older than the oldest running one has ended.
CREATE TABLE event_log (
    id    bigserial   PRIMARY KEY,
    xid   xid8        NOT NULL DEFAULT pg_current_xact_id(),
    ts    timestamptz NOT NULL DEFAULT now(),
    type  text        NOT NULL,
    actor text        NOT NULL,
    data  jsonb       NOT NULL
);
CREATE INDEX event_log_xid ON event_log (xid, id);

-- One row per leadership name; epoch grows with every acquisition.
CREATE TABLE leaders (
    name        text PRIMARY KEY,
    epoch       bigint      NOT NULL,
    holder      text        NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE kv (
    ns         text        NOT NULL,
    key        text        NOT NULL,
    value      bytea       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (ns, key)
);
