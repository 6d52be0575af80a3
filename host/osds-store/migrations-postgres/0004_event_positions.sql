-- Where each event is, for the place filters, as migrations/0014_event_positions.sql on SQLite (the same
-- columns; filled in once by osds-store/src/positions.rs for an archive written before them).
ALTER TABLE archive ADD COLUMN positions_written BIGINT NOT NULL DEFAULT 0;

ALTER TABLE events ADD COLUMN latitude DOUBLE PRECISION, ADD COLUMN longitude DOUBLE PRECISION,
    ADD COLUMN depth_km DOUBLE PRECISION, ADD COLUMN ux DOUBLE PRECISION, ADD COLUMN uy DOUBLE PRECISION,
    ADD COLUMN uz DOUBLE PRECISION;
DROP INDEX events_list;
DROP INDEX events_source_list;
CREATE INDEX events_list ON events(sort_ms DESC, last_report_id DESC, source, magnitude, origin_ms,
    latitude, longitude, depth_km, ux, uy, uz);
CREATE INDEX events_source_list ON events(source, sort_ms DESC, last_report_id DESC, magnitude, origin_ms,
    latitude, longitude, depth_km, ux, uy, uz);
CREATE INDEX events_magnitude_list ON events(magnitude DESC NULLS LAST, sort_ms DESC, last_report_id DESC);

ALTER TABLE hyp_events ADD COLUMN latitude DOUBLE PRECISION, ADD COLUMN longitude DOUBLE PRECISION,
    ADD COLUMN depth_km DOUBLE PRECISION, ADD COLUMN magnitude DOUBLE PRECISION, ADD COLUMN origin_ms BIGINT,
    ADD COLUMN ux DOUBLE PRECISION, ADD COLUMN uy DOUBLE PRECISION, ADD COLUMN uz DOUBLE PRECISION;
