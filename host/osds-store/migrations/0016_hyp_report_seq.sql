-- The live self-sensing channel's cursor: every report's place in the order it was archived (one detector writes
-- at a time; the writer assigns MAX + 1 in the report's own transaction). Reports from before take their rowid,
-- which is that order.
ALTER TABLE hyp_reports ADD COLUMN seq INTEGER;
UPDATE hyp_reports SET seq = rowid;
CREATE UNIQUE INDEX hyp_reports_seq ON hyp_reports(seq);
