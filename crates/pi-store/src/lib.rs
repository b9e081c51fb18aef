//! Session stores for pi agents in a database: [`SqliteStore`] (feature `sqlite`, an embedded
//! file, no server) and [`PostgresStore`] (feature `postgres`, many workers on one server).
//!
//! Both implement [`pi_agent::SessionStore`], so a [`pi_agent::Session`] keeps an agent's
//! transcript in them as it does in a file. Each message is one row in the reference's wire
//! JSON, ordered by its position; each session has one row with its version (optimistic
//! concurrency: the loser of two racing writers gets [`pi_agent::AgentError::SessionConflict`])
//! and its lifetime usage totals. The schema is created on first use by versioned migrations
//! (`migrations/`, recorded in `_sqlx_migrations`).
//!
//! [`open`] takes the locations `pi --session` takes: a file path, `sqlite:PATH` or
//! `postgres://...`, the session id after a `#` (default `default`).
//!
//! ```
//! use std::sync::Arc;
//! use pi_agent::{AgentOptions, Session};
//! use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
//! use pi_types::StopReason;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let file = std::env::temp_dir().join(format!("pi-store-doc-{}.sqlite", std::process::id()));
//! let faux = FauxProvider::default();
//! faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text("Hi!")], StopReason::Stop))]);
//!
//! let (store, id) = pi_store::open(&format!("sqlite:{}#support-42", file.display())).await.unwrap();
//! assert_eq!(id, "support-42");
//! let (session, saved) = Session::load(store.clone(), id).await.unwrap();
//! let agent = saved.resume(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model())).unwrap();
//! let _recording = session.attach(&agent).await.unwrap();
//! agent.prompt("Hello").await.unwrap();
//!
//! let sessions = store.list().await.unwrap();
//! assert_eq!((sessions[0].id.as_str(), sessions[0].messages), ("support-42", 2));
//! # drop(store);
//! # for suffix in ["", "-wal", "-shm"] { let _ = std::fs::remove_file(format!("{}{suffix}", file.display())); }
//! # });
//! ```

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use pi_agent::{FileStore, SessionStore};

#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod common;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub use sql::SqlStore;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;

/// The futures of [`SessionStore`]'s methods.
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a store could not be opened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The location is not one this build can open.
    #[error("session store {url}: {reason}")]
    Url {
        /// The location (without a password).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The database could not be reached or opened.
    #[error("session store {store}: {reason}")]
    Connect {
        /// The store (without a password).
        store: String,
        /// What failed.
        reason: String,
    },
    /// The schema could not be brought up to date.
    #[error("session store {store}: migrating the schema: {reason}")]
    Migrate {
        /// The store (without a password).
        store: String,
        /// What failed.
        reason: String,
    },
}

/// Where sessions are kept, from the forms `pi --session` and `pi sessions` take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A directory of JSONL files ([`FileStore`]).
    Files(PathBuf),
    /// `sqlite:PATH`: an SQLite database file.
    Sqlite(PathBuf),
    /// `postgres://...` (or `postgresql://...`): a PostgreSQL server.
    Postgres(String),
}

impl Location {
    /// Whether `text` names a database (`sqlite:...`, `postgres://...`), not a file or directory.
    pub fn is_database(text: &str) -> bool {
        !matches!(Location::parse(text), Location::Files(_))
    }

    /// A store location: `sqlite:PATH`, `postgres://...`, or else a directory.
    pub fn parse(text: &str) -> Location {
        if let Some(path) = text.strip_prefix("sqlite:") {
            Location::Sqlite(PathBuf::from(path.strip_prefix("//").unwrap_or(path)))
        } else if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            Location::Postgres(text.to_owned())
        } else {
            Location::Files(PathBuf::from(text))
        }
    }

    /// Open the store.
    pub async fn connect(&self) -> Result<Arc<dyn SessionStore>, StoreError> {
        match self {
            Location::Files(dir) => Ok(Arc::new(FileStore::new(dir))),
            #[cfg(feature = "sqlite")]
            Location::Sqlite(path) => Ok(Arc::new(SqliteStore::open(path).await?)),
            #[cfg(feature = "postgres")]
            Location::Postgres(url) => Ok(Arc::new(PostgresStore::connect(url).await?)),
            #[allow(unreachable_patterns)]
            other => Err(StoreError::Url {
                url: other.to_string(),
                reason: "this build has no support for this database (a feature of pi-rs-store)".into(),
            }),
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Files(dir) => write!(f, "{}", dir.display()),
            Location::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            Location::Postgres(url) => f.write_str(&without_password(url)),
        }
    }
}

/// The session a `pi --session` value names: its store and id. A file path is a session file
/// (its directory's [`FileStore`], the file's name as id); `sqlite:PATH#ID` and
/// `postgres://...#ID` name session `ID` of a database (`default` without `#ID`).
pub async fn open(session: &str) -> Result<(Arc<dyn SessionStore>, String), StoreError> {
    let (location, id) = match session.rsplit_once('#') {
        Some((location, id)) => (location, Some(id)),
        None => (session, None),
    };
    match Location::parse(location) {
        Location::Files(_) => {
            let (store, id) = FileStore::for_file(session);
            Ok((Arc::new(store), id))
        }
        database => {
            let id = id.filter(|id| !id.is_empty()).unwrap_or("default").to_owned();
            Ok((database.connect().await?, id))
        }
    }
}

/// `url` with its password (if any) replaced by `***`, for messages.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_and_passwords() {
        assert_eq!(Location::parse("sqlite:/tmp/a.db"), Location::Sqlite("/tmp/a.db".into()));
        assert_eq!(Location::parse("sqlite://a.db"), Location::Sqlite("a.db".into()));
        assert_eq!(Location::parse("chats"), Location::Files("chats".into()));
        assert_eq!(
            without_password("postgres://pi:secret@db:5432/pi?sslmode=require"),
            "postgres://pi:***@db:5432/pi?sslmode=require"
        );
        assert_eq!(without_password("postgres://pi@db/pi"), "postgres://pi@db/pi");
        assert_eq!(Location::parse("postgresql://u:p@h/d").to_string(), "postgresql://u:***@h/d");
    }
}
