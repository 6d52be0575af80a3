//! All access to the database. SQLite (one file, WAL, `synchronous=FULL`) is the embedded default.
//! Writes go through one [`Writer`] (see `writer.rs`), so report ids increase in commit order; reads use a pool.

pub mod backup;
mod checkpoint;
mod counts;
mod frames;
mod hyp;
mod read;
pub mod report_cache;
mod report_item;
#[cfg(test)]
mod report_pages_tests;
mod statements;
mod store;
#[cfg(test)]
mod test_archive;
mod writer;
mod writer_task;

pub use backup::{BackupFile, BackupOutcome, BackupSettings};
pub use counts::ArchiveCounts;
pub use frames::{DEFAULT_FRAMES_URL, FrameArchive, FrameArchiveSummary};
pub use hyp::*;
pub use read::*;
pub use report_item::ReportItem;
pub use store::{DEFAULT_DATABASE_URL, Store, open};
pub use writer::{
    Incoming, IngestSummary, Recovered, RecoverySummary, UnitKind, UnitRecord, Writer,
};
pub use writer_task::WriterTask;
