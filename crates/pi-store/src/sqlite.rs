//! Sessions in an SQLite database file: embedded, no server.
//!
//! The file is opened in WAL mode with `synchronous = NORMAL`: a commit survives the process
//! being killed at any point; a crash of the machine may lose the last commits (as a
//! [`pi_agent::FileStore`] that is not durable). Writers of other processes wait for each
//! other's commits (`busy_timeout`, 30 s).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::Sqlite;

use crate::common::{Named, MIGRATOR};
use crate::sql::SqlStore;
use crate::StoreError;

/// Sessions in an SQLite database file ([`SessionStore`](pi_agent::SessionStore); schema in `migrations/`).
pub type SqliteStore = SqlStore<Sqlite>;

impl SqliteStore {
    /// Open (or create) the database file at `path` and bring its schema up to date.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let store = format!("sqlite:{}", path.display());
        let failed = |error: sqlx::Error| StoreError::Connect { store: store.clone(), reason: error.to_string() };
        let options = SqliteConnectOptions::from_str("sqlite:")
            .map_err(failed)?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await
            .map_err(failed)?;
        // SQLite has no lock for the migrator: of two processes opening a new file at once, one
        // applies the migration and the other fails; its next attempt finds it applied.
        let mut attempt = 0;
        while let Err(error) = MIGRATOR.run(&pool).await {
            attempt += 1;
            if attempt == 5 {
                return Err(StoreError::Migrate { store, reason: error.to_string() });
            }
            tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
        }
        Ok(SqlStore { pool, named: Named { store }, snapshot: None })
    }
}
