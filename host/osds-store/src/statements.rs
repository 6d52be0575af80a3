//! SQL statements collected before they run, in SQL both backends accept, with `?` parameters bound in order.
//!
//! On SQLite they are sent to the connection as one query: SQLite runs them one after another in the
//! connection's worker thread, and the writer pays one round trip to that thread instead of one per statement
//! (each round trip wakes two threads; on this machine that was most of a commit's time). PostgreSQL prepares
//! one statement at a time, so there each runs on its own, its `?`s numbered `$1`, `$2`, ...
//!
//! The SQLite ingest thread (`sqlite_ingest.rs`) runs them through rusqlite instead, on its own thread, each
//! statement prepared once and kept in the connection's cache.

use rusqlite::types::{ToSqlOutput, ValueRef};
use sqlx::postgres::{PgArguments, PgConnection, PgRow, Postgres};
use sqlx::sqlite::{Sqlite, SqliteArguments, SqliteRow};
use sqlx::{Arguments, SqliteConnection};

/// A bound value, typed as the column it goes to.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<String>),
    Bytes(Vec<u8>),
    Bool(bool),
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(Some(v))
    }
}
impl From<crate::ReportId> for Value {
    fn from(v: crate::ReportId) -> Value {
        Value::Int(Some(v.0))
    }
}
impl From<crate::DeliveryId> for Value {
    fn from(v: crate::DeliveryId) -> Value {
        Value::Int(Some(v.0))
    }
}
impl From<Option<i64>> for Value {
    fn from(v: Option<i64>) -> Value {
        Value::Int(v)
    }
}
impl From<Option<f64>> for Value {
    fn from(v: Option<f64>) -> Value {
        Value::Real(v)
    }
}
impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(Some(v))
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(Some(v.to_owned()))
    }
}
impl From<Option<String>> for Value {
    fn from(v: Option<String>) -> Value {
        Value::Text(v)
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::Bytes(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        let value = match self {
            Value::Int(v) => v.map_or(ValueRef::Null, ValueRef::Integer),
            Value::Real(v) => v.map_or(ValueRef::Null, ValueRef::Real),
            Value::Text(v) => v
                .as_deref()
                .map_or(ValueRef::Null, |t| ValueRef::Text(t.as_bytes())),
            Value::Bytes(v) => ValueRef::Blob(v),
            Value::Bool(v) => ValueRef::Integer(i64::from(*v)),
        };
        Ok(ToSqlOutput::Borrowed(value))
    }
}

/// One statement and its values.
struct Statement {
    sql: String,
    values: Vec<Value>,
}

#[derive(Default)]
pub(crate) struct Statements {
    list: Vec<Statement>,
}

impl Statements {
    /// One statement.
    pub(crate) fn one(sql: &str) -> Statements {
        let mut statements = Statements::default();
        statements.push(sql);
        statements
    }

    /// Appends a statement (without its `;`).
    pub(crate) fn push(&mut self, sql: &str) -> &mut Self {
        self.list.push(Statement {
            sql: sql.to_owned(),
            values: Vec::new(),
        });
        self
    }

    /// Appends `other`'s statements, in order.
    pub(crate) fn extend(&mut self, other: Statements) -> &mut Self {
        self.list.extend(other.list);
        self
    }

    /// Binds the next `?` of the last statement pushed.
    pub(crate) fn bind(&mut self, value: impl Into<Value>) -> &mut Self {
        self.list
            .last_mut()
            .expect("a statement is pushed before its values")
            .values
            .push(value.into());
        self
    }

    /// Every statement as one SQLite query and its arguments.
    fn sqlite(self) -> (String, SqliteArguments<'static>) {
        let mut sql = String::new();
        let mut args = SqliteArguments::default();
        for statement in self.list {
            sql.push_str(&statement.sql);
            sql.push_str(";\n");
            for value in statement.values {
                // SQLite's arguments are kept as values; adding one cannot fail.
                let _ = match value {
                    Value::Int(v) => args.add(v),
                    Value::Real(v) => args.add(v),
                    Value::Text(v) => args.add(v),
                    Value::Bytes(v) => args.add(v),
                    Value::Bool(v) => args.add(v),
                };
            }
        }
        (sql, args)
    }

    /// Runs every statement, in order, in one round trip, and returns the first row they produce (the last
    /// statement's, when only it selects). Every row is read: a statement stopped after its first row stays
    /// open and holds a read snapshot past the commit, which keeps WAL checkpoints from completing.
    pub(crate) async fn fetch_one(self, conn: &mut SqliteConnection) -> anyhow::Result<SqliteRow> {
        self.sqlite_rows(conn)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| anyhow::anyhow!("the statements returned no row"))
    }

    /// Runs every statement, in order, in one round trip.
    pub(crate) async fn execute(self, conn: &mut SqliteConnection) -> anyhow::Result<()> {
        self.sqlite_changes(conn).await.map(drop)
    }

    /// Runs every statement, in order, in one round trip; returns how many rows they changed.
    pub(crate) async fn sqlite_changes(self, conn: &mut SqliteConnection) -> anyhow::Result<u64> {
        if self.list.is_empty() {
            return Ok(0);
        }
        let (sql, args) = self.sqlite();
        Ok(sqlx::query_with(&sql, args)
            .execute(conn)
            .await?
            .rows_affected())
    }

    /// Runs every statement, in order, on a rusqlite connection; returns how many rows they changed.
    pub(crate) fn run_blocking(self, conn: &rusqlite::Connection) -> anyhow::Result<u64> {
        let mut changed = 0;
        for statement in self.list {
            let mut prepared = conn.prepare_cached(&statement.sql)?;
            changed += prepared.execute(rusqlite::params_from_iter(&statement.values))? as u64;
        }
        Ok(changed)
    }

    /// Runs every statement, in order, on a rusqlite connection, and maps the last one's first row (every row
    /// is read, as in [`Statements::fetch_one`]).
    pub(crate) fn first_row_blocking<T>(
        mut self,
        conn: &rusqlite::Connection,
        map: impl FnOnce(&rusqlite::Row<'_>) -> T,
    ) -> anyhow::Result<T> {
        let last = self
            .list
            .pop()
            .ok_or_else(|| anyhow::anyhow!("no statement returns a row"))?;
        self.run_blocking(conn)?;
        let mut prepared = conn.prepare_cached(&last.sql)?;
        let mut rows = prepared.query(rusqlite::params_from_iter(&last.values))?;
        let first = rows
            .next()?
            .map(map)
            .ok_or_else(|| anyhow::anyhow!("the statements returned no row"))?;
        while rows.next()?.is_some() {}
        Ok(first)
    }

    /// The rows of the one statement, read from a SQLite pool or connection.
    pub(crate) async fn sqlite_rows<'c, E>(self, executor: E) -> anyhow::Result<Vec<SqliteRow>>
    where
        E: sqlx::Executor<'c, Database = Sqlite>,
    {
        let (sql, args) = self.sqlite();
        Ok(sqlx::query_with(&sql, args).fetch_all(executor).await?)
    }

    /// The rows of the one statement, read from a PostgreSQL pool or connection.
    pub(crate) async fn pg_rows<'c, E>(mut self, executor: E) -> anyhow::Result<Vec<PgRow>>
    where
        E: sqlx::Executor<'c, Database = Postgres>,
    {
        anyhow::ensure!(self.list.len() == 1, "a read is one statement");
        let (sql, args) = numbered(self.list.remove(0))?;
        Ok(sqlx::query_with(&sql, args).fetch_all(executor).await?)
    }

    /// Runs every statement, in order, on PostgreSQL, and returns the last one's row.
    pub(crate) async fn pg_fetch_one(mut self, conn: &mut PgConnection) -> anyhow::Result<PgRow> {
        let last = self
            .list
            .pop()
            .ok_or_else(|| anyhow::anyhow!("no statement returns a row"))?;
        self.pg_execute(conn).await?;
        let (sql, args) = numbered(last)?;
        Ok(sqlx::query_with(&sql, args).fetch_one(conn).await?)
    }

    /// Runs every statement, in order, on PostgreSQL.
    pub(crate) async fn pg_execute(self, conn: &mut PgConnection) -> anyhow::Result<()> {
        self.pg_changes(conn).await.map(drop)
    }

    /// Runs every statement, in order, on PostgreSQL; returns how many rows they changed.
    pub(crate) async fn pg_changes(self, conn: &mut PgConnection) -> anyhow::Result<u64> {
        let mut changed = 0;
        for statement in self.list {
            let (sql, args) = numbered(statement)?;
            changed += sqlx::query_with(&sql, args)
                .execute(&mut *conn)
                .await?
                .rows_affected();
        }
        Ok(changed)
    }
}

/// The statement with its `?`s numbered for PostgreSQL, and its arguments. (No statement here has a `?`
/// inside a string literal.)
fn numbered(statement: Statement) -> anyhow::Result<(String, PgArguments)> {
    let mut sql = String::with_capacity(statement.sql.len() + 16);
    let mut n = 0;
    for c in statement.sql.chars() {
        if c == '?' {
            n += 1;
            sql.push('$');
            sql.push_str(&n.to_string());
        } else {
            sql.push(c);
        }
    }
    anyhow::ensure!(
        n == statement.values.len(),
        "{n} parameters but {} values in `{}`",
        statement.values.len(),
        statement.sql
    );
    let mut args = PgArguments::default();
    for value in statement.values {
        let added = match value {
            Value::Int(v) => args.add(v),
            Value::Real(v) => args.add(v),
            Value::Text(v) => args.add(v),
            Value::Bytes(v) => args.add(v),
            Value::Bool(v) => args.add(v),
        };
        added.map_err(|e| anyhow::anyhow!("bind a value: {e}"))?;
    }
    Ok((sql, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_follows_the_question_marks() {
        let mut s = Statements::default();
        s.push("UPDATE t SET a = ?, b = ? WHERE c = ?")
            .bind(1_i64)
            .bind("x")
            .bind(Some(2.5));
        let (sql, _) = numbered(s.list.pop().unwrap()).unwrap();
        assert_eq!(sql, "UPDATE t SET a = $1, b = $2 WHERE c = $3");
    }

    #[test]
    fn a_missing_value_is_an_error() {
        let mut s = Statements::default();
        s.push("SELECT ?, ?").bind(1_i64);
        assert!(numbered(s.list.pop().unwrap()).is_err());
    }
}
