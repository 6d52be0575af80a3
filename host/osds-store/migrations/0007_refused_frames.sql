-- Upstream frames refused for their size (osds serve --upstream-max-frame-mib). A refused frame is not read past
-- its header, so its bytes (and their SHA-256) are not known: only where and when it came, and how large it was.
CREATE TABLE refused_frames (
    id          INTEGER PRIMARY KEY,
    session_id  INTEGER NOT NULL REFERENCES sessions(id),
    received_at TEXT NOT NULL,
    size_bytes  INTEGER NOT NULL,
    limit_bytes INTEGER NOT NULL
);
