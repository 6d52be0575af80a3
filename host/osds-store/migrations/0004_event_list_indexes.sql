-- /events lists newest first by (sort_ms, last_report_id); these indexes match that order exactly, so a page is
-- read in index order instead of sorting every matching event in a temporary B-tree, and a magnitude filter
-- within a channel does not walk the whole channel.
CREATE INDEX events_sort_last ON events(sort_ms DESC, last_report_id DESC);
CREATE INDEX events_source_sort_last ON events(source, sort_ms DESC, last_report_id DESC);
CREATE INDEX events_source_magnitude ON events(source, magnitude);
