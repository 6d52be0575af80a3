-- The EEW archive. Raw payloads, deliveries and report versions are append-only: never updated, never deleted.

-- One attempt to hold an upstream WebSocket connection.
CREATE TABLE sessions (
    id            INTEGER PRIMARY KEY,
    path          TEXT NOT NULL,              -- upstream path, e.g. /sc_eew or /all_eew
    role          TEXT NOT NULL,              -- primary (the channel's own socket) or redundant (/all_eew)
    url           TEXT NOT NULL,
    started_at    TEXT NOT NULL,              -- RFC 3339 UTC, when the connection attempt began
    connected_at  TEXT,                       -- when the upgrade succeeded
    ended_at      TEXT,
    end_reason    TEXT
);

-- Exact bytes of every frame received, content-addressed: the same bytes are stored once.
CREATE TABLE raw_payloads (
    sha256        TEXT PRIMARY KEY,           -- lowercase hex SHA-256 of bytes
    bytes         BLOB NOT NULL,
    size          INTEGER NOT NULL,
    first_seen_at TEXT NOT NULL
);

-- Every reception of a decodable unit of a frame (a frame is one unit unless it is a JSON array of frames).
CREATE TABLE deliveries (
    id            INTEGER PRIMARY KEY,
    session_id    INTEGER NOT NULL REFERENCES sessions(id),
    received_at   TEXT NOT NULL,
    raw_sha256    TEXT NOT NULL REFERENCES raw_payloads(sha256),
    unit_index    INTEGER NOT NULL DEFAULT 0, -- position in a JSON-array frame, 0 otherwise
    type_tag      TEXT,                       -- top-level `type`, when readable
    source        TEXT,                       -- channel the unit was routed to; NULL when ignored or unroutable
    marker        TEXT NOT NULL,              -- how it arrived: websocket push, or query-or-push
    outcome       TEXT NOT NULL,              -- new-version | duplicate | unparsed | ignored
    report_id     INTEGER,                    -- the version this delivery carried (new-version, duplicate)
    event_key     TEXT,
    decoder       TEXT,                       -- name@sha256 of the decoder that decoded it
    error_kind    TEXT,                       -- for unparsed: malformed | unsupported | missing-field | trap | timeout | unrouted
    error_message TEXT
);
CREATE INDEX deliveries_event ON deliveries(event_key, id);
CREATE INDEX deliveries_outcome ON deliveries(outcome, id);
CREATE INDEX deliveries_source ON deliveries(source, id);

-- Report versions. `id` is the public cursor: assigned by the single writer, so it increases in commit order.
CREATE TABLE reports (
    id                INTEGER PRIMARY KEY,
    event_key         TEXT NOT NULL,
    source            TEXT NOT NULL,
    identity_sha256   TEXT NOT NULL,          -- SHA-256 of the canonical JSON of the payload without `type`
    delivery_id       INTEGER NOT NULL REFERENCES deliveries(id),
    received_at       TEXT NOT NULL,
    event_id          TEXT NOT NULL,
    upstream_event_id TEXT NOT NULL,
    revision          INTEGER NOT NULL,
    issued_at         TEXT,
    origin_at         TEXT,
    epicenter         TEXT,
    magnitude         REAL,
    report_json       TEXT NOT NULL,          -- the decoded payload fields, as the decoder returned them
    decoder_name      TEXT NOT NULL,
    decoder_sha256    TEXT NOT NULL,
    UNIQUE (source, identity_sha256)
);
CREATE INDEX reports_event ON reports(event_key, revision, id);

-- One event per (source, eventId); never merged across channels. The row is a summary kept current by the writer.
CREATE TABLE events (
    id                TEXT PRIMARY KEY,       -- 32 lowercase hex: first 16 bytes of SHA-256("<source>:<eventId>")
    source            TEXT NOT NULL,
    source_event_id   TEXT NOT NULL,
    origin_at         TEXT,                   -- from the latest report that carries one
    origin_ms         INTEGER,                -- origin_at as Unix ms, for date filters
    sort_ms           INTEGER NOT NULL,       -- origin_ms, else first reception: list order and month bucket
    month             TEXT NOT NULL,          -- YYYY-MM in Beijing time of sort_ms
    latest_report_id  INTEGER NOT NULL,       -- highest revision, newest version of it
    latest_revision   INTEGER NOT NULL,
    report_count      INTEGER NOT NULL,
    missing_revisions TEXT NOT NULL,          -- JSON array of revisions below the highest not archived
    epicenter         TEXT,
    magnitude         REAL,
    upstream_ids      TEXT NOT NULL,          -- space-separated upstream event ids seen, for `q`
    first_report_id   INTEGER NOT NULL,
    last_report_id    INTEGER NOT NULL,       -- most recently archived version
    UNIQUE (source, source_event_id)
);
CREATE INDEX events_sort ON events(sort_ms DESC, id);
CREATE INDEX events_source_sort ON events(source, sort_ms DESC, id);
CREATE INDEX events_last ON events(source, last_report_id);

-- Intervals in which a channel had neither its own socket nor /all_eew connected. ended_at NULL: ongoing.
CREATE TABLE outages (
    id          INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,
    started_at  TEXT NOT NULL,
    ended_at    TEXT,
    reason      TEXT NOT NULL
);
CREATE INDEX outages_source ON outages(source, id);

-- Counts of things that are not archived rows (heartbeats, pongs): name → value.
CREATE TABLE counters (
    name   TEXT PRIMARY KEY,
    value  INTEGER NOT NULL
);
