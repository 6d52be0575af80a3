//! Codes the contract spells as strings, as types.

/// Why a write failed, named for either database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCode {
    /// No room for the archive (SQLite `SQLITE_FULL`, PostgreSQL `53100`).
    DiskFull,
    /// The file system failed a read or write (an I/O error, SQLite `SQLITE_IOERR`, PostgreSQL `58030`).
    IoError,
    /// Another process holds a lock the write needs (SQLite `SQLITE_BUSY`/`SQLITE_LOCKED`, PostgreSQL `55P03`,
    /// a deadlock or serialisation failure).
    Locked,
    /// The database server cannot be reached, refuses connections or is shutting down (PostgreSQL classes 08
    /// and 57P, `53300`, a read-only server, a lost connection).
    Unavailable,
    /// The database refused the data of the write itself (PostgreSQL classes 22, 23 and 54; SQLite
    /// `SQLITE_TOOBIG`, `SQLITE_CONSTRAINT`, `SQLITE_MISMATCH`, `SQLITE_RANGE`): tied to a frame, so retrying
    /// cannot help. Such a frame is archived alone as unstorable; writes never stop for it.
    RefusedData,
    /// Any other refusal.
    WriteFailed,
}

impl FailureCode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::DiskFull => "disk_full",
            FailureCode::IoError => "io_error",
            FailureCode::Locked => "locked",
            FailureCode::Unavailable => "unavailable",
            FailureCode::RefusedData => "refused_data",
            FailureCode::WriteFailed => "write_failed",
        }
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
