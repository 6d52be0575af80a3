-- When each ingester was last known alive, by name (as migrations/0012_liveness.sql on SQLite): a killed
-- ingester's channels and sessions end there, not when another process notices.
CREATE TABLE liveness (
    ingester  TEXT PRIMARY KEY,
    alive_at  TEXT NOT NULL
);
