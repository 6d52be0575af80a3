-- When each ingester was last known alive (its archive task writes it every few seconds). After a crash, the
-- next start ends the sessions the dead process left open, and begins the outage of each channel it held, at
-- this time rather than at the restart: the seconds the service was down are an outage like any other. On
-- SQLite the one ingester's row is named ''.
CREATE TABLE liveness (
    ingester  TEXT PRIMARY KEY,
    alive_at  TEXT NOT NULL
);
