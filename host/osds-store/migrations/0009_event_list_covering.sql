-- /events lists newest first by (sort_ms, last_report_id) and filters on source, magnitude and origin_ms. These
-- two indexes hold every one of those columns, so a page (its rowids) and its count are read from an index alone,
-- in list order: no table row is touched for a skipped or filtered event and nothing is sorted. The indexes of
-- 0004 made a channel + minimum magnitude filter pick (source, magnitude) and sort every match (60-70 ms at
-- 187,500 events; BENCHMARKS.md, issue 25).
DROP INDEX events_sort_last;
DROP INDEX events_source_sort_last;
DROP INDEX events_source_magnitude;
CREATE INDEX events_list ON events(sort_ms DESC, last_report_id DESC, source, magnitude, origin_ms);
CREATE INDEX events_source_list ON events(source, sort_ms DESC, last_report_id DESC, magnitude, origin_ms);
