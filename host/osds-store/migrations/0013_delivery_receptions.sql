-- A frame's number on its session (from 1; NULL for deliveries written by tools). A group commit is retried
-- when its acknowledgement is lost, though it may have committed: with each reception's units unique, the
-- retry records none of them a second time.
ALTER TABLE deliveries ADD COLUMN reception INTEGER;
CREATE UNIQUE INDEX deliveries_reception ON deliveries(session_id, reception, unit_index)
    WHERE reception IS NOT NULL;
