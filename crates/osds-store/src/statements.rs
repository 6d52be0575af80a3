//! Several SQL statements sent to the connection as one query: SQLite runs them one after another in the
//! connection's worker thread, and the writer pays one round trip to that thread instead of one per statement
//! (each round trip wakes two threads; on this machine that was most of a commit's time). Unnamed `?`
//! parameters take the bound values in order across the statements.

use sqlx::sqlite::SqliteArguments;
use sqlx::{Arguments, Encode, Sqlite, SqliteConnection, Type};

#[derive(Default)]
pub(super) struct Statements {
    sql: String,
    args: SqliteArguments<'static>,
}

impl Statements {
    /// Appends a statement (without its `;`).
    pub(super) fn push(&mut self, sql: &str) -> &mut Self {
        self.sql.push_str(sql);
        self.sql.push_str(";\n");
        self
    }

    /// Binds the next `?`.
    pub(super) fn bind<T>(&mut self, value: T) -> &mut Self
    where
        T: Encode<'static, Sqlite> + Type<Sqlite> + Send + 'static,
    {
        // SQLite's arguments are kept as values; adding one cannot fail.
        let _ = self.args.add(value);
        self
    }

    /// Runs every statement, in order, in one round trip, and returns the first row they produce (the last
    /// statement's, when only it selects). Every row is read: a statement stopped after its first row stays
    /// open and holds a read snapshot past the commit, which keeps WAL checkpoints from completing.
    pub(super) async fn fetch_one(
        self,
        conn: &mut SqliteConnection,
    ) -> anyhow::Result<sqlx::sqlite::SqliteRow> {
        sqlx::query_with(&self.sql, self.args)
            .fetch_all(conn)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| anyhow::anyhow!("the statements returned no row"))
    }

    /// Runs every statement, in order, in one round trip.
    pub(super) async fn execute(self, conn: &mut SqliteConnection) -> anyhow::Result<()> {
        if !self.sql.is_empty() {
            sqlx::query_with(&self.sql, self.args).execute(conn).await?;
        }
        Ok(())
    }
}
