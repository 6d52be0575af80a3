-- The archive's identity, and the floor of its report ids.
--
-- `archive_id` is fixed when the archive is created and replaced when a backup is restored over it
-- (`osds restore`): a consumer that sees it change knows its cursor belongs to another archive.
-- `id_floor`: report ids at or below it may have been handed out by the archive a restore replaced;
-- new report versions get ids above it, so no id is ever served twice for different reports.
CREATE TABLE archive (
    singleton   INTEGER PRIMARY KEY CHECK (singleton = 1),
    archive_id  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    id_floor    INTEGER NOT NULL DEFAULT 0
);

INSERT INTO archive (singleton, archive_id, created_at)
VALUES (1, lower(hex(randomblob(16))), strftime('%Y-%m-%dT%H:%M:%SZ', 'now'));
