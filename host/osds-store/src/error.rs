//! The store's write error. A database's error is named once, where it leaves the [`Writer`](crate::Writer):
//! its [`FailureCode`] (what the writer task's retry policy and `/status` need) and whether it lost the
//! connection (what the PostgreSQL writer needs to connect again). Nothing above reads the cause's types.

pub use osds_contract::FailureCode;

/// A write the archive did not take, and why.
#[derive(Debug)]
pub struct WriteError {
    kind: FailureCode,
    connection_lost: bool,
    error: anyhow::Error,
}

impl WriteError {
    pub fn kind(&self) -> FailureCode {
        self.kind
    }

    /// The connection the write went over is gone: the next write must connect again.
    pub fn connection_lost(&self) -> bool {
        self.connection_lost
    }
}

impl From<anyhow::Error> for WriteError {
    fn from(error: anyhow::Error) -> WriteError {
        WriteError {
            kind: failure_code(&error),
            connection_lost: connection_lost(&error),
            error,
        }
    }
}

impl From<sqlx::Error> for WriteError {
    fn from(error: sqlx::Error) -> WriteError {
        WriteError::from(anyhow::Error::from(error))
    }
}

// Shown as the error it wraps, context first; its causes follow as this error's sources.
impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// The reason for a failed write, from the error's chain.
fn failure_code(error: &anyhow::Error) -> FailureCode {
    for cause in error.chain() {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return io_failure(io);
        }
        if let Some(error) = cause.downcast_ref::<sqlx::Error>() {
            return match error {
                sqlx::Error::Database(db) => {
                    match db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                        Some(pg) => postgres_failure(pg.code()),
                        None => sqlite_failure(db.code().and_then(|c| c.parse::<i64>().ok())),
                    }
                }
                sqlx::Error::Io(io) => io_failure(io),
                sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::Tls(_)
                | sqlx::Error::Protocol(_)
                | sqlx::Error::WorkerCrashed => FailureCode::Unavailable,
                _ => FailureCode::WriteFailed,
            };
        }
        if let Some(rusqlite::Error::SqliteFailure(failure, _)) =
            cause.downcast_ref::<rusqlite::Error>()
        {
            return sqlite_failure(Some(i64::from(failure.extended_code)));
        }
    }
    FailureCode::WriteFailed
}

fn io_failure(io: &std::io::Error) -> FailureCode {
    if io.kind() == std::io::ErrorKind::StorageFull {
        FailureCode::DiskFull
    } else {
        FailureCode::IoError
    }
}

/// The reason for SQLite's (extended) result `code`: its primary code is the low byte.
fn sqlite_failure(code: Option<i64>) -> FailureCode {
    match code.map(|c| c & 0xff) {
        Some(13) => FailureCode::DiskFull,
        Some(10) => FailureCode::IoError,
        Some(5 | 6) => FailureCode::Locked,
        // TOOBIG, CONSTRAINT, MISMATCH, RANGE: the statement's data.
        Some(18 | 19 | 20 | 25) => FailureCode::RefusedData,
        _ => FailureCode::WriteFailed,
    }
}

/// The reason for PostgreSQL's SQLSTATE `code` (its class is the first two characters).
fn postgres_failure(code: &str) -> FailureCode {
    match code {
        "53100" => FailureCode::DiskFull,
        "58030" => FailureCode::IoError,
        "55P03" | "40P01" | "40001" => FailureCode::Locked,
        "53300" | "25006" => FailureCode::Unavailable,
        _ => match code.get(..2) {
            Some("08" | "57") => FailureCode::Unavailable,
            // Data exceptions (a NUL in text, an invalid encoding), integrity violations, program limits (an
            // index entry too large).
            Some("22" | "23" | "54") => FailureCode::RefusedData,
            _ => FailureCode::WriteFailed,
        },
    }
}

/// Whether the error's chain says the connection to the server is gone (a refused statement leaves it as it
/// was).
fn connection_lost(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<sqlx::Error>(),
            Some(
                sqlx::Error::Io(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::Protocol(_)
                    | sqlx::Error::WorkerCrashed
            )
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_codes_are_named_per_database() {
        assert_eq!(postgres_failure("22021"), FailureCode::RefusedData);
        assert_eq!(postgres_failure("54000"), FailureCode::RefusedData);
        assert_eq!(postgres_failure("53100"), FailureCode::DiskFull);
        assert_eq!(postgres_failure("57P01"), FailureCode::Unavailable);
        assert_eq!(postgres_failure("08006"), FailureCode::Unavailable);
        assert_eq!(postgres_failure("55P03"), FailureCode::Locked);
        assert_eq!(postgres_failure("42P01"), FailureCode::WriteFailed);
        // SQLite's extended codes: SQLITE_BUSY_SNAPSHOT, SQLITE_FULL, SQLITE_CONSTRAINT_TRIGGER.
        assert_eq!(sqlite_failure(Some(517)), FailureCode::Locked);
        assert_eq!(sqlite_failure(Some(13)), FailureCode::DiskFull);
        assert_eq!(sqlite_failure(Some(1811)), FailureCode::RefusedData);
    }

    /// A refusal of the data, seen through the writer's own context, keeps its kind and its message.
    #[test]
    fn a_wrapped_database_error_keeps_its_kind_and_its_chain() {
        let io = std::io::Error::new(std::io::ErrorKind::StorageFull, "no space left on device");
        let error = WriteError::from(anyhow::Error::from(io).context("archiving frames"));
        assert_eq!(error.kind(), FailureCode::DiskFull);
        assert!(!error.connection_lost());
        let shown = format!("{:#}", anyhow::Error::from(error));
        assert_eq!(shown, "archiving frames: no space left on device");
        let lost = WriteError::from(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert!(lost.connection_lost());
        assert_eq!(lost.kind(), FailureCode::IoError);
    }
}
