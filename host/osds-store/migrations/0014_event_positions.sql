-- Where each event is, for the place filters of /events and /hyp/events (start/end, box, radius, depth,
-- magnitude range, order): the latest report's position, depth (and, for self-sensing events, magnitude and
-- origin time) on the event's row, with the unit vector of the position on a sphere (ux, uy, uz), so a distance
-- test is arithmetic (SQLite has no trigonometry). The writer keeps them current; an archive written before them
-- has them filled in once when it is opened (osds-store/src/positions.rs), then `positions_written` is 1.
ALTER TABLE archive ADD COLUMN positions_written INTEGER NOT NULL DEFAULT 0;

ALTER TABLE events ADD COLUMN latitude REAL;
ALTER TABLE events ADD COLUMN longitude REAL;
ALTER TABLE events ADD COLUMN depth_km REAL;
ALTER TABLE events ADD COLUMN ux REAL;
ALTER TABLE events ADD COLUMN uy REAL;
ALTER TABLE events ADD COLUMN uz REAL;
-- The list indexes (0009) hold every filtered column, so a filtered list or count is read from an index alone.
DROP INDEX events_list;
DROP INDEX events_source_list;
CREATE INDEX events_list ON events(sort_ms DESC, last_report_id DESC, source, magnitude, origin_ms,
    latitude, longitude, depth_km, ux, uy, uz);
CREATE INDEX events_source_list ON events(source, sort_ms DESC, last_report_id DESC, magnitude, origin_ms,
    latitude, longitude, depth_km, ux, uy, uz);
-- `order=magnitude`: largest first, unknown last (SQLite sorts NULL lowest, so DESC puts it last).
CREATE INDEX events_magnitude_list ON events(magnitude DESC, sort_ms DESC, last_report_id DESC);

ALTER TABLE hyp_events ADD COLUMN latitude REAL;
ALTER TABLE hyp_events ADD COLUMN longitude REAL;
ALTER TABLE hyp_events ADD COLUMN depth_km REAL;
ALTER TABLE hyp_events ADD COLUMN magnitude REAL;
ALTER TABLE hyp_events ADD COLUMN origin_ms INTEGER;
ALTER TABLE hyp_events ADD COLUMN ux REAL;
ALTER TABLE hyp_events ADD COLUMN uy REAL;
ALTER TABLE hyp_events ADD COLUMN uz REAL;
