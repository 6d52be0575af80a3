-- When each event last changed (its newest version's reception, Unix ms), for the FDSN event service's
-- `updatedafter`. The writer keeps it; an archive from before has it filled in with the positions
-- (osds-store/src/positions.rs: `positions_written` is set back to 0 so they are written again once).
ALTER TABLE events ADD COLUMN updated_ms INTEGER;
UPDATE archive SET positions_written = 0;
