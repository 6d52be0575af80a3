-- events_sort and events_source_sort (0001) ordered by (sort_ms, id); since 0009 the list is read in
-- (sort_ms, last_report_id) order from events_list and events_source_list, and no query uses them. Each new
-- report version wrote a page of both (2 of the ~19 pages a one-version commit writes).
DROP INDEX events_sort;
DROP INDEX events_source_sort;
