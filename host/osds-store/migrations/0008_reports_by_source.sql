-- `/reports`, `/stream` and `/ws` with `source`: each channel's report versions in id order, read by range.
CREATE INDEX reports_source ON reports(source, id);
