-- Re-decoding of archived payloads (`osds reparse`), append-only like the rest: a delivery that was unparsed
-- stays unparsed in `deliveries`; a row here says which version a later decoder recovered from it.
CREATE TABLE reparses (
    id           INTEGER PRIMARY KEY,
    delivery_id  INTEGER NOT NULL REFERENCES deliveries(id),
    report_id    INTEGER NOT NULL REFERENCES reports(id),
    event_key    TEXT NOT NULL,
    outcome      TEXT NOT NULL,              -- new-version | duplicate (the version was archived already)
    decoder      TEXT NOT NULL,              -- name@sha256 of the decoder that recovered it
    reparsed_at  TEXT NOT NULL,
    UNIQUE (delivery_id)
);
CREATE INDEX reparses_event ON reparses(event_key, delivery_id);
