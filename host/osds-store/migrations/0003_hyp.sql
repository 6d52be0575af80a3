-- Self-sensing (`hyp`): the service's own detections. Reports are append-only and stored as the exact payload
-- the shaper component produced, with its SHA-256. Events and station metrics are summaries kept current.

CREATE TABLE hyp_events (
    id             TEXT PRIMARY KEY,          -- contains colons, e.g. hyp:20240101T071022:1
    first_at       INTEGER NOT NULL,          -- Unix ms of first detection
    updated_at     INTEGER NOT NULL,          -- Unix ms of the latest report
    status         TEXT NOT NULL,             -- the latest report's lifecycle state
    region         TEXT NOT NULL,             -- display grouping only
    public         INTEGER NOT NULL DEFAULT 0, -- 1 once a report left `candidate`
    hidden         INTEGER NOT NULL DEFAULT 0, -- an operator withdrew it from the public API
    latest_number  INTEGER NOT NULL
);
CREATE INDEX hyp_events_first ON hyp_events(first_at DESC, id);

CREATE TABLE hyp_reports (
    event_id     TEXT NOT NULL REFERENCES hyp_events(id),
    number       INTEGER NOT NULL,            -- reportNumber, from 1
    payload      BLOB NOT NULL,               -- the report exactly as shaped
    sha256       TEXT NOT NULL,               -- lowercase hex SHA-256 of payload
    status       TEXT NOT NULL,
    reported_at  INTEGER NOT NULL,
    recorded_at  INTEGER NOT NULL,
    shaper       TEXT NOT NULL,               -- name@sha256 of the shaper component
    solution     BLOB NOT NULL,               -- the detector solution it was shaped from (a shaper's canary)
    PRIMARY KEY (event_id, number)
);

-- Physical stations associated by the algorithm, with their peak per layered metric (`surface:pgaGal`, ...).
CREATE TABLE hyp_stations (
    event_id   TEXT NOT NULL REFERENCES hyp_events(id),
    code       TEXT NOT NULL,
    name       TEXT,
    latitude   REAL NOT NULL,
    longitude  REAL NOT NULL,
    PRIMARY KEY (event_id, code)
);
CREATE TABLE hyp_station_metrics (
    event_id     TEXT NOT NULL REFERENCES hyp_events(id),
    station      TEXT NOT NULL,
    metric       TEXT NOT NULL,
    peak         REAL NOT NULL,
    source_at    INTEGER NOT NULL,            -- observation time of the frame with the peak
    received_at  INTEGER NOT NULL,            -- when that frame was received
    recovered    INTEGER NOT NULL DEFAULT 0,  -- 1: filled in later from the image archive, not seen live
    PRIMARY KEY (event_id, station, metric)
);

-- Latest state of the detector and the recorder, as JSON, for /hyp/status.
CREATE TABLE hyp_state (
    name        TEXT PRIMARY KEY,             -- detector | recorder
    updated_at  INTEGER NOT NULL,
    state       TEXT NOT NULL
);
