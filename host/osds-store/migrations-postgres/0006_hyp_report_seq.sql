-- As migrations/0016_hyp_report_seq.sql on SQLite; reports from before are numbered in the order they were
-- recorded.
ALTER TABLE hyp_reports ADD COLUMN seq BIGINT;
UPDATE hyp_reports r SET seq = s.n
FROM (SELECT event_id, number, row_number() OVER (ORDER BY recorded_at, event_id, number) AS n FROM hyp_reports) s
WHERE r.event_id = s.event_id AND r.number = s.number;
CREATE UNIQUE INDEX hyp_reports_seq ON hyp_reports(seq);
