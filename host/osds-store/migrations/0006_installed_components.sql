-- Components put in service on a running server (`osds components install` and `rollback`, SIGHUP reloads),
-- so that a restart and `osds reparse` use what ran: every change in order, and the `.wasm` bytes of every
-- installed component, content-addressed.
CREATE TABLE component_files (
    sha256     TEXT PRIMARY KEY,      -- of the .wasm bytes, lowercase hex
    wasm       BLOB NOT NULL,
    stored_at  TEXT NOT NULL
);

CREATE TABLE component_changes (
    id               INTEGER PRIMARY KEY,
    channel          TEXT NOT NULL,        -- the decoder's `source`
    action           TEXT NOT NULL CHECK (action IN ('install', 'rollback')),
    sha256           TEXT NOT NULL,        -- in service after the change
    previous_sha256  TEXT,                 -- what a rollback would put back after the change
    changed_at       TEXT NOT NULL
);
CREATE INDEX component_changes_channel ON component_changes(channel, id);
