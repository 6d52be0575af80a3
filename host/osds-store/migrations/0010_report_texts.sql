-- Each report version's `EewReport` JSON text as the API serves it, written with the version, so a `/reports`
-- page is a read of consecutive short rows and a concatenation (rendering 1,000 versions from their columns
-- cost 9-16 ms; BENCHMARKS.md, issue 25). `archive.served_format` names the form the texts are in; an archive in
-- an older form (0: none written yet) is rendered again when it is opened.
CREATE TABLE report_texts (
    id      INTEGER PRIMARY KEY REFERENCES reports(id),
    source  TEXT NOT NULL,
    json    TEXT NOT NULL
);
ALTER TABLE archive ADD COLUMN served_format INTEGER NOT NULL DEFAULT 0;
