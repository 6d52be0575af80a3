//! All access to the database. SQLite (one file, WAL, `synchronous=FULL`) is the embedded default.
//! PostgreSQL (`postgres://`) is for deployments of several processes. Writes go through a [`Writer`] (see
//! `writer.rs`), so report ids increase in commit order; reads use a pool.

mod archiving;
pub mod backup;
mod beside;
mod checkpoint;
pub mod codes;
mod components;
mod counts;
mod db;
mod error;
mod frames;
mod hyp;
pub mod ids;
mod lock;
mod open;
pub mod positions;
pub mod postgres;
mod read;
mod records;
mod rows;
pub mod served;
mod sqlite;
mod sqlite_ingest;
mod statements;
mod store;
/// Archives written through the real writer, for tests (here and, with the `test-archive` feature, elsewhere).
#[cfg(any(test, feature = "test-archive"))]
pub mod test_archive;
/// Throwaway PostgreSQL servers, for tests.
#[cfg(any(test, feature = "test-archive"))]
pub mod test_postgres;
mod wal_batch;
mod writer;
mod writer_task;

pub use archiving::{Incoming, IngestSummary, Recovered, RecoverySummary, UnitKind, UnitRecord};
pub use backup::{BackupFile, BackupOutcome, BackupSettings};
pub use codes::{Code, DeliveryOutcome, EndReason, Marker, OutageReason, SocketRole};
pub use components::{ChannelComponent, ComponentAction, ComponentChange};
pub use counts::ArchiveCounts;
pub use db::is_postgres_url;
pub use error::{FailureCode, WriteError};
pub use frames::{DEFAULT_FRAMES_URL, FrameArchive, FrameArchiveSummary, FrameImage};
pub use hyp::*;
pub use ids::{DeliveryId, ReportId};
pub use lock::ArchiveLock;
pub use open::{open, open_existing};
pub use read::*;
pub use rows::*;
pub use store::{DEFAULT_DATABASE_URL, Store, database_path};
pub use writer::Writer;
pub use writer_task::{
    CommitHook, DEFAULT_QUEUE_BYTES, WriteFailure, WriteHealth, WriteMonitor, WriterTask,
};
