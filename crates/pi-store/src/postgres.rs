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

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::Postgres;

use crate::common::{Named, MIGRATOR};
use crate::sql::SqlStore;
use crate::StoreError;

/// Sessions in a PostgreSQL database ([`SessionStore`](pi_agent::SessionStore); schema in `migrations/`).
pub type PostgresStore = SqlStore<Postgres>;

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
        Ok(SqlStore {
            pool,
            named: Named { store },
            snapshot: Some("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"),
        })
    }
}
