//! Sessions in a PostgreSQL database: many workers, one server.
//!
//! Commits are durable as the server is configured (by default: flushed to its disk). Two
//! writers of one session serialize on its row: the second's `UPDATE ... WHERE version = $7`
//! runs after the first commits and finds the new version, so it changes nothing and reports
//! the conflict. A load reads in one `REPEATABLE READ` transaction (one snapshot). Every wait
//! has a limit: connecting (retried while the server refuses) and taking a connection 10 s,
//! a statement 60 s.

use std::str::FromStr;
use std::time::Duration;

use pi_agent::{AgentError, SessionStore, SessionSummary, SessionWrite, StoredSession};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, QueryBuilder};

use crate::common::{unsigned, Named, Row, MIGRATOR, ROWS_PER_INSERT};
use crate::{BoxFuture, StoreError};

/// Sessions in a PostgreSQL database ([`SessionStore`]; schema in `migrations/`).
#[derive(Clone, Debug)]
pub struct PostgresStore {
    pool: PgPool,
    named: Named,
}

impl PostgresStore {
    /// Connect to the server at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`,
    /// libpq's parameters) and bring the schema up to date.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(|error| StoreError::Url { url: crate::without_password(url), reason: error.to_string() })?;
        // Named without the password: errors may be logged.
        let store = format!(
            "postgres://{}@{}:{}/{}",
            options.get_username(),
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or_default()
        );
        let options = options.options([("statement_timeout", "60s")]);
        let failed = |error: sqlx::Error| StoreError::Connect { store: store.clone(), reason: error.to_string() };
        let pool = PgPoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(failed)?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|error| StoreError::Migrate { store: store.clone(), reason: error.to_string() })?;
        Ok(PostgresStore { pool, named: Named { store } })
    }

    /// The session's row and message rows, one snapshot.
    async fn read(&self, id: &str) -> Result<Option<(i64, String, Vec<(i64, String)>)>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY").execute(&mut *tx).await?;
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
        let claimed = match row.expected {
            0 => sqlx::query(
                "INSERT INTO pi_sessions (id, version, messages, usage, cost, updated_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
            ),
            _ => sqlx::query(
                "UPDATE pi_sessions SET version = $2, messages = $3, usage = $4, cost = $5, updated_ms = $6 \
                 WHERE id = $1 AND version = $7",
            ),
        }
        .bind(id)
        .bind(row.version)
        .bind(row.messages)
        .bind(&row.usage)
        .bind(row.cost)
        .bind(row.updated_ms)
        .bind(row.expected)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if claimed != 1 {
            return Ok(false);
        }
        if rewrite {
            sqlx::query("DELETE FROM pi_messages WHERE session_id = $1").bind(id).execute(&mut *tx).await?;
        }
        for chunk in row.new.chunks(ROWS_PER_INSERT) {
            let mut insert = QueryBuilder::<Postgres>::new("INSERT INTO pi_messages (session_id, seq, message) ");
            insert.push_values(chunk, |mut values, (seq, json)| {
                values.push_bind(id).push_bind(*seq).push_bind(json.as_str());
            });
            insert.build().execute(&mut *tx).await?;
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

impl SessionStore for PostgresStore {
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
