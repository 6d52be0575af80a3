-- A frame's number on its session, as migrations/0013_delivery_receptions.sql on SQLite: a group commit retried
-- after its acknowledgement was lost records no reception twice.
ALTER TABLE deliveries ADD COLUMN reception BIGINT;
CREATE UNIQUE INDEX deliveries_reception ON deliveries(session_id, reception, unit_index)
    WHERE reception IS NOT NULL;
