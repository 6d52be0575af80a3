//! The read side's connection pool, SQLite's or PostgreSQL's, and rows read alike from either ([`Columns`]).
//! A read written once runs its statement (`Statements`, `?` parameters) on whichever pool the store has.

use crate::statements::Statements;
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgPool, PgRow};
use sqlx::sqlite::{SqliteConnection, SqlitePool, SqliteRow};

/// Whether `url` names a PostgreSQL database.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// SQL that is true when the ingester numbered `{number}` runs: it holds its advisory lock (see `postgres::PgWriter::register`).
/// A bigint key's lock shows as `classid` (high half) and `objid` (low half), with `objsubid` 1.
pub(crate) fn ingester_runs(number: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted \
         AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         AND l.classid::bigint = ({number} >> 32) AND l.objid::bigint = ({number} & 4294967295) \
         AND l.objsubid = 1)"
    )
}

#[derive(Clone)]
pub(crate) enum ReadPool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// A row's columns by name, whichever database it came from. Reading a column the statement did not select,
/// or as the wrong type, is a bug in the statement next to it: it panics, as sqlx's `Row::get` does.
pub(crate) trait Columns {
    fn int(&self, column: &str) -> i64;
    fn opt_int(&self, column: &str) -> Option<i64>;
    fn text(&self, column: &str) -> String;
    fn opt_text(&self, column: &str) -> Option<String>;
    fn real(&self, column: &str) -> f64;
    fn opt_real(&self, column: &str) -> Option<f64>;
    fn bytes(&self, column: &str) -> Vec<u8>;
    fn opt_bytes(&self, column: &str) -> Option<Vec<u8>>;
}

/// A connection a write runs on (inside the writer's transaction), SQLite's or PostgreSQL's: what both
/// backends' writers share is written once over it.
pub(crate) trait WriteConn {
    /// Runs the statements in order; returns how many rows they changed.
    async fn run(&mut self, statements: Statements) -> anyhow::Result<u64>;

    /// The rows of one statement, each mapped by `map`.
    async fn rows<T>(
        &mut self,
        statement: Statements,
        map: impl Fn(&dyn Columns) -> T,
    ) -> anyhow::Result<Vec<T>>;
}

impl WriteConn for SqliteConnection {
    async fn run(&mut self, statements: Statements) -> anyhow::Result<u64> {
        statements.sqlite_changes(self).await
    }

    async fn rows<T>(
        &mut self,
        statement: Statements,
        map: impl Fn(&dyn Columns) -> T,
    ) -> anyhow::Result<Vec<T>> {
        let rows = statement.sqlite_rows(self).await?;
        Ok(rows.iter().map(|row| map(row)).collect())
    }
}

impl WriteConn for PgConnection {
    async fn run(&mut self, statements: Statements) -> anyhow::Result<u64> {
        statements.pg_changes(self).await
    }

    async fn rows<T>(
        &mut self,
        statement: Statements,
        map: impl Fn(&dyn Columns) -> T,
    ) -> anyhow::Result<Vec<T>> {
        let rows = statement.pg_rows(self).await?;
        Ok(rows.iter().map(|row| map(row)).collect())
    }
}

macro_rules! columns {
    ($row:ty) => {
        impl Columns for $row {
            fn int(&self, column: &str) -> i64 {
                self.opt_int(column)
                    .unwrap_or_else(|| panic!("column {column} is NULL"))
            }
            fn opt_int(&self, column: &str) -> Option<i64> {
                self.wide_int(column)
            }
            fn text(&self, column: &str) -> String {
                self.get(column)
            }
            fn opt_text(&self, column: &str) -> Option<String> {
                self.get(column)
            }
            fn real(&self, column: &str) -> f64 {
                self.get(column)
            }
            fn opt_real(&self, column: &str) -> Option<f64> {
                self.get(column)
            }
            fn bytes(&self, column: &str) -> Vec<u8> {
                self.get(column)
            }
            fn opt_bytes(&self, column: &str) -> Option<Vec<u8>> {
                self.get(column)
            }
        }
    };
}
columns!(SqliteRow);
columns!(PgRow);

impl Columns for rusqlite::Row<'_> {
    fn int(&self, column: &str) -> i64 {
        rusqlite_column(self, column)
    }
    fn opt_int(&self, column: &str) -> Option<i64> {
        rusqlite_column(self, column)
    }
    fn text(&self, column: &str) -> String {
        rusqlite_column(self, column)
    }
    fn opt_text(&self, column: &str) -> Option<String> {
        rusqlite_column(self, column)
    }
    fn real(&self, column: &str) -> f64 {
        rusqlite_column(self, column)
    }
    fn opt_real(&self, column: &str) -> Option<f64> {
        rusqlite_column(self, column)
    }
    fn bytes(&self, column: &str) -> Vec<u8> {
        rusqlite_column(self, column)
    }
    fn opt_bytes(&self, column: &str) -> Option<Vec<u8>> {
        rusqlite_column(self, column)
    }
}

fn rusqlite_column<T: rusqlite::types::FromSql>(row: &rusqlite::Row<'_>, column: &str) -> T {
    row.get(column)
        .unwrap_or_else(|e| panic!("column {column}: {e}"))
}

/// An integer column as `i64`: SQLite's integers are; PostgreSQL's may be narrower (a literal `1` is `integer`).
trait WideInt {
    fn wide_int(&self, column: &str) -> Option<i64>;
}

impl WideInt for SqliteRow {
    fn wide_int(&self, column: &str) -> Option<i64> {
        self.get(column)
    }
}

impl WideInt for PgRow {
    fn wide_int(&self, column: &str) -> Option<i64> {
        match self.try_get::<Option<i64>, _>(column) {
            Ok(value) => value,
            Err(_) => self.get::<Option<i32>, _>(column).map(i64::from),
        }
    }
}

impl ReadPool {
    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self, ReadPool::Postgres(_))
    }

    /// The column of `sessions` (as `alias`) naming the ingester: PostgreSQL archives have several; SQLite's
    /// has none (NULL).
    pub(crate) fn session_ingester(&self, alias: &str) -> String {
        match self {
            ReadPool::Sqlite(_) => "NULL".to_owned(),
            ReadPool::Postgres(_) => format!("{alias}.ingester"),
        }
    }

    /// The SQLite pool, for tests that look at SQLite's own plans and rows.
    #[cfg(test)]
    pub(crate) fn sqlite(&self) -> anyhow::Result<&SqlitePool> {
        match self {
            ReadPool::Sqlite(pool) => Ok(pool),
            ReadPool::Postgres(_) => anyhow::bail!("not a SQLite store"),
        }
    }

    /// Every row of `statement` (one statement), each mapped by `map`.
    pub(crate) async fn rows<T>(
        &self,
        statement: Statements,
        map: impl Fn(&dyn Columns) -> T,
    ) -> anyhow::Result<Vec<T>> {
        Ok(match self {
            ReadPool::Sqlite(pool) => statement
                .sqlite_rows(pool)
                .await?
                .iter()
                .map(|row| map(row))
                .collect(),
            ReadPool::Postgres(pool) => statement
                .pg_rows(pool)
                .await?
                .iter()
                .map(|row| map(row))
                .collect(),
        })
    }

    /// Every row of `statement`, each mapped by `map`, which may refuse one (a stored code this service never
    /// wrote): the first refusal is the error.
    pub(crate) async fn try_rows<T>(
        &self,
        statement: Statements,
        map: impl Fn(&dyn Columns) -> anyhow::Result<T>,
    ) -> anyhow::Result<Vec<T>> {
        self.rows(statement, map).await?.into_iter().collect()
    }

    /// The one row `statement` must return, mapped by `map`.
    pub(crate) async fn one<T>(
        &self,
        statement: Statements,
        map: impl Fn(&dyn Columns) -> T,
    ) -> anyhow::Result<T> {
        self.row(statement, map)
            .await?
            .ok_or_else(|| anyhow::anyhow!("the statement returned no row"))
    }

    /// The integer that keys an event in the kept `/events` lists: SQLite's `rowid`, PostgreSQL's `rid`.
    pub(crate) fn event_key_column(&self) -> &'static str {
        match self {
            ReadPool::Sqlite(_) => "rowid",
            ReadPool::Postgres(_) => "rid",
        }
    }

    /// A join that keeps the loops in the order written: SQLite's `CROSS JOIN` (its planner would otherwise
    /// walk a whole index to save a sort); PostgreSQL has no such hint and a plain `JOIN`.
    pub(crate) fn ordered_join(&self) -> &'static str {
        match self {
            ReadPool::Sqlite(_) => "CROSS JOIN",
            ReadPool::Postgres(_) => "JOIN",
        }
    }

    /// A table of the elements of the JSON array bound to its `?`, named `alias`, with columns `value` (the
    /// element, as text on PostgreSQL) and `key` (its place, in array order): each database's own function.
    pub(crate) fn json_elements(&self, alias: &str) -> String {
        match self {
            ReadPool::Sqlite(_) => format!("json_each(?) AS {alias}"),
            ReadPool::Postgres(_) => format!(
                "jsonb_array_elements_text(CAST(? AS jsonb)) WITH ORDINALITY AS {alias}(value, key)"
            ),
        }
    }

    /// The commit horizon in this database's SQL (see `ids.rs`).
    pub(crate) fn horizon(&self) -> &'static str {
        match self {
            ReadPool::Sqlite(_) => crate::ids::HORIZON,
            ReadPool::Postgres(_) => crate::ids::POSTGRES_HORIZON,
        }
    }

    /// The first row of `statement`, if any, mapped by `map`.
    pub(crate) async fn row<T>(
        &self,
        statement: Statements,
        map: impl Fn(&dyn Columns) -> T,
    ) -> anyhow::Result<Option<T>> {
        Ok(self.rows(statement, map).await?.into_iter().next())
    }
}
