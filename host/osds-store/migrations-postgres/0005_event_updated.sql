-- As migrations/0015_event_updated.sql on SQLite.
ALTER TABLE events ADD COLUMN updated_ms BIGINT;
UPDATE archive SET positions_written = 0;
