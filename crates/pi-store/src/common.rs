//! What the SQL stores share: the schema's migrations, the rows' wire JSON, the error values.

use pi_agent::{AgentError, SessionWrite, StoredSession, UsageTotal};
use pi_types::AgentMessage;

/// The versioned schema (`migrations/`), applied on first use; each database records what it
/// ran in `_sqlx_migrations` and runs only what is new.
pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// How many message rows one `INSERT` carries (3 parameters each, under both databases' limits).
pub(crate) const ROWS_PER_INSERT: usize = 500;

/// A store as errors name it (no password: errors may be logged).
#[derive(Clone, Debug)]
pub(crate) struct Named {
    pub(crate) store: String,
}

impl Named {
    pub(crate) fn session(&self, id: &str) -> String {
        format!("{id} in {}", self.store)
    }

    pub(crate) fn failed(&self, id: &str, error: impl std::fmt::Display) -> AgentError {
        AgentError::SessionIo { path: self.session(id), reason: error.to_string() }
    }

    pub(crate) fn conflict(&self, id: &str) -> AgentError {
        AgentError::SessionConflict { session: self.session(id) }
    }

    /// A saved session from its row (`version`, `usage`) and its messages' rows (`seq`,
    /// `message`) in order.
    pub(crate) fn decode(
        &self,
        id: &str,
        version: i64,
        usage: &str,
        rows: Vec<(i64, String)>,
    ) -> Result<StoredSession, AgentError> {
        let usage: UsageTotal = serde_json::from_str(usage).map_err(|error| self.failed(id, error))?;
        let mut messages = Vec::with_capacity(rows.len());
        for (seq, json) in rows {
            let message: AgentMessage = serde_json::from_str(&json).map_err(|error| AgentError::SessionCorrupt {
                path: self.session(id),
                line: usize::try_from(seq).unwrap_or(usize::MAX).saturating_add(1),
                reason: error.to_string(),
            })?;
            messages.push(message);
        }
        let version = u64::try_from(version).map_err(|_| self.failed(id, "a negative version"))?;
        Ok(StoredSession { messages, usage, version, warnings: Vec::new() })
    }
}

/// The values a write puts in the session's row and its new message rows.
pub(crate) struct Row {
    pub(crate) expected: i64,
    pub(crate) version: i64,
    pub(crate) messages: i64,
    pub(crate) usage: String,
    pub(crate) cost: f64,
    pub(crate) updated_ms: i64,
    /// `(seq, wire JSON)` of each message to insert.
    pub(crate) new: Vec<(i64, String)>,
}

impl Row {
    pub(crate) fn of(named: &Named, id: &str, write: &SessionWrite<'_>) -> Result<Row, AgentError> {
        let number = |n: usize| i64::try_from(n).map_err(|_| named.failed(id, "too many messages"));
        let expected = i64::try_from(write.version).map_err(|_| named.failed(id, "version out of range"))?;
        let mut new = Vec::with_capacity(write.messages.len().saturating_sub(write.from));
        for (offset, message) in write.messages.iter_from(write.from).enumerate() {
            let json = serde_json::to_string(message).map_err(|error| named.failed(id, error))?;
            new.push((number(write.from.saturating_add(offset))?, json));
        }
        let updated_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Ok(Row {
            expected,
            version: expected.checked_add(1).ok_or_else(|| named.failed(id, "version out of range"))?,
            messages: number(write.messages.len())?,
            usage: serde_json::to_string(write.usage).map_err(|error| named.failed(id, error))?,
            cost: write.usage.usage.cost.total,
            updated_ms,
            new,
        })
    }
}

/// A summary row's numbers, clamped to the summary's unsigned fields.
pub(crate) fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
