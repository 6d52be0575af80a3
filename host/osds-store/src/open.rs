//! Opening an archive: the database URL's scheme chooses the backend.

use crate::store::{Store, database_path};
use crate::writer::{Backend, Writer};

/// Opens the database at `url`, which must exist (every command but `osds serve` works on an archive that
/// is already there: a mistyped URL must not quietly create an empty one), like [`open`].
pub async fn open_existing(url: &str) -> anyhow::Result<(Store, Writer)> {
    if crate::db::is_postgres_url(url) {
        anyhow::ensure!(
            crate::postgres::holds_an_archive(url).await?,
            "database {url} holds no osds archive (is --database-url right?); only `osds serve` creates one"
        );
        return open(url).await;
    }
    let path = database_path(url)?;
    anyhow::ensure!(
        path.is_file(),
        "database {} does not exist (is --database-url right?); only `osds serve` creates an archive",
        path.display()
    );
    open(url).await
}

/// Opens the archive at `url` — a SQLite file (created with its folder when missing) or a PostgreSQL database
/// (`postgres://`) — runs the migrations, and returns the read side and the writer.
pub async fn open(url: &str) -> anyhow::Result<(Store, Writer)> {
    let (store, backend) = if crate::db::is_postgres_url(url) {
        let (store, writer) = crate::postgres::open(url).await?;
        (store, Backend::Postgres(writer))
    } else {
        let (store, writer) = crate::sqlite::open(url).await?;
        (store, Backend::Sqlite(Box::new(writer)))
    };
    Ok((store, Writer::new(backend).await?))
}
