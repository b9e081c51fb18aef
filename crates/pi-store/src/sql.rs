//! The SQL of both databases' stores: one implementation, generic over the `sqlx` driver.
//!
//! # Protocol
//! - **Load**: the session's row, then its message rows by position, in one read transaction
//!   (one snapshot; PostgreSQL reads `REPEATABLE READ`).
//! - **Write** (append or rewrite), one transaction: claim the session's row at the version the
//!   writer names (`UPDATE ... WHERE version = $7 RETURNING`; a new session `INSERT ... ON
//!   CONFLICT DO NOTHING RETURNING`); no row back means another writer got there first, and
//!   the transaction is dropped (rolled back) with nothing written. Then the rows: a rewrite
//!   deletes the old ones; the new ones go in multi-row `INSERT`s of up to 500.
//!
//! Statements use `$N` parameters, which both drivers bind by number.

use pi_agent::{AgentError, SessionStore, SessionSummary, SessionWrite, StoredSession};
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Type};

use crate::common::{unsigned, Named, Row, ROWS_PER_INSERT};
use crate::BoxFuture;

/// Sessions in an SQL database ([`SessionStore`]; schema in `migrations/`): [`crate::SqliteStore`]
/// and [`crate::PostgresStore`] are its two forms.
#[derive(Debug)]
pub struct SqlStore<DB: Database> {
    pub(crate) pool: Pool<DB>,
    pub(crate) named: Named,
    /// The statement that makes a read transaction one snapshot, where one is needed.
    pub(crate) snapshot: Option<&'static str>,
}

impl<DB: Database> Clone for SqlStore<DB> {
    fn clone(&self) -> Self {
        SqlStore { pool: self.pool.clone(), named: self.named.clone(), snapshot: self.snapshot }
    }
}

impl<DB> SqlStore<DB>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    for<'q> f64: Encode<'q, DB> + Type<DB>,
    for<'r> (i64,): FromRow<'r, DB::Row>,
    for<'r> (i64, String): FromRow<'r, DB::Row>,
    for<'r> (String, i64, i64, f64): FromRow<'r, DB::Row>,
{
    /// The session's row and message rows, one snapshot.
    async fn read(&self, id: &str) -> Result<Option<(i64, String, Vec<(i64, String)>)>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        if let Some(snapshot) = self.snapshot {
            sqlx::query(snapshot).execute(&mut *tx).await?;
        }
        let row: Option<(i64, String)> = sqlx::query_as("SELECT version, usage FROM pi_sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((version, usage)) = row else { return Ok(None) };
        let rows = sqlx::query_as("SELECT seq, message FROM pi_messages WHERE session_id = $1 ORDER BY seq")
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some((version, usage, rows)))
    }

    /// Write `row`; `Ok(false)` when the session is not at `row.expected` (nothing written).
    async fn write(&self, id: &str, row: &Row, rewrite: bool) -> Result<bool, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let claim = match row.expected {
            0 => {
                "INSERT INTO pi_sessions (id, version, messages, usage, cost, updated_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING version"
            }
            _ => {
                "UPDATE pi_sessions SET version = $2, messages = $3, usage = $4, cost = $5, updated_ms = $6 \
                 WHERE id = $1 AND version = $7 RETURNING version"
            }
        };
        let mut claimed = sqlx::query_as::<DB, (i64,)>(claim)
            .bind(id)
            .bind(row.version)
            .bind(row.messages)
            .bind(row.usage.as_str())
            .bind(row.cost);
        claimed = claimed.bind(row.updated_ms);
        if row.expected != 0 {
            claimed = claimed.bind(row.expected);
        }
        if claimed.fetch_optional(&mut *tx).await?.is_none() {
            return Ok(false);
        }
        if rewrite {
            sqlx::query("DELETE FROM pi_messages WHERE session_id = $1").bind(id).execute(&mut *tx).await?;
        }
        for chunk in row.new.chunks(ROWS_PER_INSERT) {
            let mut sql = String::from("INSERT INTO pi_messages (session_id, seq, message) VALUES ");
            for index in 0..chunk.len() {
                let first = index * 3 + 1;
                let separator = if index == 0 { "" } else { ", " };
                sql.push_str(&format!("{separator}(${first}, ${}, ${})", first + 1, first + 2));
            }
            let mut insert = sqlx::query::<DB>(&sql);
            for (seq, json) in chunk {
                insert = insert.bind(id).bind(*seq).bind(json.as_str());
            }
            insert.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn write_session(&self, id: &str, write: SessionWrite<'_>, rewrite: bool) -> Result<u64, AgentError> {
        let row = Row::of(&self.named, id, &write)?;
        match self.write(id, &row, rewrite).await {
            Ok(true) => Ok(unsigned(row.version)),
            Ok(false) => Err(self.named.conflict(id)),
            Err(error) => Err(self.named.failed(id, error)),
        }
    }

    async fn list_sessions(&self) -> Result<Vec<SessionSummary>, AgentError> {
        let rows: Vec<(String, i64, i64, f64)> =
            sqlx::query_as("SELECT id, updated_ms, messages, cost FROM pi_sessions ORDER BY updated_ms DESC, id")
                .fetch_all(&self.pool)
                .await
                .map_err(|error| self.named.failed("*", error))?;
        Ok(rows
            .into_iter()
            .map(|(id, updated, messages, cost)| SessionSummary {
                id,
                updated_ms: unsigned(updated),
                messages: unsigned(messages),
                cost,
            })
            .collect())
    }

    async fn delete_session(&self, id: &str) -> Result<(), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM pi_messages WHERE session_id = $1").bind(id).execute(&mut *tx).await?;
        sqlx::query("DELETE FROM pi_sessions WHERE id = $1").bind(id).execute(&mut *tx).await?;
        tx.commit().await
    }
}

/// [`SessionStore`] for the store of one driver (its bounds are those of the inherent impl).
macro_rules! session_store {
    ($driver:ty) => {
        impl SessionStore for SqlStore<$driver> {
            fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<StoredSession, AgentError>> {
                Box::pin(async move {
                    match self.read(id).await.map_err(|error| self.named.failed(id, error))? {
                        None => Ok(StoredSession::default()),
                        Some((version, usage, rows)) => self.named.decode(id, version, &usage, rows),
                    }
                })
            }

            fn append<'a>(&'a self, id: &'a str, write: SessionWrite<'a>) -> BoxFuture<'a, Result<u64, AgentError>> {
                Box::pin(self.write_session(id, write, false))
            }

            fn rewrite<'a>(&'a self, id: &'a str, write: SessionWrite<'a>) -> BoxFuture<'a, Result<u64, AgentError>> {
                Box::pin(self.write_session(id, write, true))
            }

            fn list(&self) -> BoxFuture<'_, Result<Vec<SessionSummary>, AgentError>> {
                Box::pin(self.list_sessions())
            }

            fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), AgentError>> {
                Box::pin(async move { self.delete_session(id).await.map_err(|error| self.named.failed(id, error)) })
            }
        }
    };
}

#[cfg(feature = "sqlite")]
session_store!(sqlx::Sqlite);
#[cfg(feature = "postgres")]
session_store!(sqlx::Postgres);
