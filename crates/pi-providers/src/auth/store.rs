//! The credential store seam and its two implementations.
//!
//! As in the reference, `modify` is the only write path: it runs a read-modify-write under a
//! per-provider lock, so a refresh re-reads the credential after waiting and concurrent requests
//! refresh once. [`FileCredentialStore`] keeps the reference's `auth.json` format (an object
//! keyed by provider id) in a file only its owner can read (0600 on Unix), replaced atomically:
//! the new text goes to a temporary file in the same folder, which is flushed to disk (`fsync`)
//! and renamed over the old one, so a crash at any point leaves the old or the new file, never a
//! mix. Entries this crate cannot parse are kept as they are.
//!
//! Across processes, every `modify` and `delete` of a [`FileCredentialStore`] holds an exclusive
//! lock on `<file>.lock` beside the file (`flock` on Unix, `LockFileEx` on Windows, through
//! `fs4`; the kernel releases it when the holder exits or dies) from before it reads the
//! credential until after it wrote the new file. Two `pi` processes refreshing one sign-in at
//! once therefore refresh once (the second sees the first's fresh token under the lock), and
//! neither loses an entry the other wrote. The lock file is never removed: removing it would let
//! two processes lock two different files. Reads take no lock (the rename makes them whole).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::credential::{Credential, CredentialInfo};
use super::AuthError;

/// The update `modify` runs on the current credential: the new credential, or `None` to leave
/// the entry as it is.
pub type ModifyFn<'a> =
    Box<dyn FnOnce(Option<Credential>) -> BoxFuture<'a, Result<Option<Credential>, AuthError>> + Send + 'a>;

/// Where credentials live, one per provider id.
///
/// `read` answers `Ok(None)` for a missing entry; methods fail only when the storage fails.
pub trait CredentialStore: Send + Sync {
    /// The stored credential, possibly expired.
    fn read(&self, provider_id: &str) -> Result<Option<Credential>, AuthError>;

    /// Which providers have a credential, and of which kind (no secret is read out).
    fn list(&self) -> Result<Vec<CredentialInfo>, AuthError>;

    /// Serialized read-modify-write, the only write path: `update` sees the current credential
    /// and returns the new one (or `None`: unchanged). Answers the credential stored afterwards.
    /// An error from `update` leaves the entry unchanged and is returned.
    fn modify<'a>(
        &'a self,
        provider_id: &'a str,
        update: ModifyFn<'a>,
    ) -> BoxFuture<'a, Result<Option<Credential>, AuthError>>;

    /// Remove a credential (log out), serialized against `modify`.
    fn delete<'a>(&'a self, provider_id: &'a str) -> BoxFuture<'a, Result<(), AuthError>>;
}

/// One async lock per provider id.
#[derive(Default)]
struct ProviderLocks(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl ProviderLocks {
    fn get(&self, provider_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(locks.entry(provider_id.to_owned()).or_default())
    }
}

/// Credentials held in memory (the reference's default store).
#[derive(Default)]
pub struct InMemoryCredentialStore {
    credentials: Mutex<HashMap<String, Credential>>,
    locks: ProviderLocks,
}

impl fmt::Debug for InMemoryCredentialStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InMemoryCredentialStore").finish_non_exhaustive()
    }
}

impl InMemoryCredentialStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Credential>> {
        self.credentials.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl CredentialStore for InMemoryCredentialStore {
    fn read(&self, provider_id: &str) -> Result<Option<Credential>, AuthError> {
        Ok(self.map().get(provider_id).cloned())
    }

    fn list(&self) -> Result<Vec<CredentialInfo>, AuthError> {
        let mut list: Vec<CredentialInfo> = self
            .map()
            .iter()
            .map(|(id, credential)| CredentialInfo { provider_id: id.clone(), kind: credential.kind() })
            .collect();
        list.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
        Ok(list)
    }

    fn modify<'a>(
        &'a self,
        provider_id: &'a str,
        update: ModifyFn<'a>,
    ) -> BoxFuture<'a, Result<Option<Credential>, AuthError>> {
        Box::pin(async move {
            let lock = self.locks.get(provider_id);
            let _guard = lock.lock().await;
            let current = self.read(provider_id)?;
            match update(current.clone()).await? {
                Some(next) => {
                    self.map().insert(provider_id.to_owned(), next.clone());
                    Ok(Some(next))
                }
                None => Ok(current),
            }
        })
    }

    fn delete<'a>(&'a self, provider_id: &'a str) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(async move {
            let lock = self.locks.get(provider_id);
            let _guard = lock.lock().await;
            self.map().remove(provider_id);
            Ok(())
        })
    }
}

/// Credentials in an `auth.json` file (see the module docs for the guarantees).
///
/// Writes are serialized per provider within the process and by the lock file across
/// processes, and every write re-reads the file under that lock, so entries other processes
/// wrote are kept and a refresh runs once.
pub struct FileCredentialStore {
    path: PathBuf,
    locks: ProviderLocks,
    /// Serializes the file's read-modify-write across providers.
    file: Mutex<()>,
}

impl fmt::Debug for FileCredentialStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileCredentialStore").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Longest wait for another process's lock (its refresh is bounded at 15 seconds).
const LOCK_WAIT: Duration = Duration::from_secs(60);
const LOCK_POLL: Duration = Duration::from_millis(10);

/// The held cross-process lock, released when dropped (or by the kernel when the process dies).
struct FileLock(std::fs::File);

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = fs4::FileExt::unlock(&self.0);
    }
}

impl FileCredentialStore {
    /// A store over the file at `path` (created on the first write, with its folder).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), locks: ProviderLocks::default(), file: Mutex::new(()) }
    }

    /// The store at [`default_auth_path`](crate::auth::codex::default_auth_path): `$PI_AUTH_FILE`,
    /// else `~/.pi/agent/auth.json`.
    pub fn default_location() -> Self {
        Self::new(crate::auth::codex::default_auth_path())
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn fail(&self, action: &'static str, provider: &str, reason: impl fmt::Display) -> AuthError {
        AuthError::Store { action, provider: provider.to_owned(), reason: format!("{}: {reason}", self.path.display()) }
    }

    fn read_all(&self, provider: &str) -> Result<Map<String, Value>, AuthError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
            Err(e) => return Err(self.fail("read", provider, e)),
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Map::new());
        }
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(map)) => Ok(map),
            // serde_json's message names a line and column, never the text there.
            Ok(_) => Err(self.fail("read", provider, "not a JSON object")),
            Err(e) => Err(self.fail("read", provider, format!("not JSON ({e})"))),
        }
    }

    /// The file's folder, created (owner-only) when missing.
    fn folder(&self, action: &'static str, provider: &str) -> Result<PathBuf, AuthError> {
        crate::atomic_file::folder(&self.path).map_err(|e| self.fail(action, provider, e))
    }

    fn file_name(&self) -> String {
        self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }

    /// Take the cross-process lock (see the module docs), waiting at most [`LOCK_WAIT`].
    async fn lock_file(&self, provider: &str) -> Result<FileLock, AuthError> {
        let path = self.folder("lock", provider)?.join(format!("{}.lock", self.file_name()));
        let mut open = std::fs::OpenOptions::new();
        open.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
        let file = open.open(&path).map_err(|e| self.fail("lock", provider, e))?;
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match fs4::FileExt::try_lock(&file) {
                Ok(()) => return Ok(FileLock(file)),
                Err(fs4::TryLockError::WouldBlock) if Instant::now() < deadline => tokio::time::sleep(LOCK_POLL).await,
                Err(fs4::TryLockError::WouldBlock) => {
                    return Err(self.fail("lock", provider, "another process held the lock for over 60 seconds"))
                }
                Err(fs4::TryLockError::Error(e)) => return Err(self.fail("lock", provider, e)),
            }
        }
    }

    /// Replace the file with `all`, atomically (`crate::atomic_file`).
    fn write_all(&self, provider: &str, all: &Map<String, Value>) -> Result<(), AuthError> {
        let text = serde_json::to_string_pretty(all).map_err(|e| self.fail("write", provider, e))?;
        crate::atomic_file::replace(&self.path, text.as_bytes()).map_err(|e| self.fail("write", provider, e))
    }

    fn file_guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn parse(value: &Value) -> Option<Credential> {
    serde_json::from_value(value.clone()).ok()
}

impl CredentialStore for FileCredentialStore {
    fn read(&self, provider_id: &str) -> Result<Option<Credential>, AuthError> {
        Ok(self.read_all(provider_id)?.get(provider_id).and_then(parse))
    }

    fn list(&self) -> Result<Vec<CredentialInfo>, AuthError> {
        let all = self.read_all("*")?;
        let mut list: Vec<CredentialInfo> = all
            .iter()
            .filter_map(|(id, value)| {
                let kind = serde_json::from_value(value.get("type")?.clone()).ok()?;
                Some(CredentialInfo { provider_id: id.clone(), kind })
            })
            .collect();
        list.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
        Ok(list)
    }

    fn modify<'a>(
        &'a self,
        provider_id: &'a str,
        update: ModifyFn<'a>,
    ) -> BoxFuture<'a, Result<Option<Credential>, AuthError>> {
        Box::pin(async move {
            let lock = self.locks.get(provider_id);
            let _guard = lock.lock().await;
            let _file_lock = self.lock_file(provider_id).await?;
            let current = self.read(provider_id)?;
            let Some(next) = update(current.clone()).await? else { return Ok(current) };
            let value = serde_json::to_value(&next).map_err(|e| self.fail("write", provider_id, e))?;
            let _file = self.file_guard();
            let mut all = self.read_all(provider_id)?;
            all.insert(provider_id.to_owned(), value);
            self.write_all(provider_id, &all)?;
            Ok(Some(next))
        })
    }

    fn delete<'a>(&'a self, provider_id: &'a str) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(async move {
            let lock = self.locks.get(provider_id);
            let _guard = lock.lock().await;
            let _file_lock = self.lock_file(provider_id).await?;
            let _file = self.file_guard();
            let mut all = self.read_all(provider_id)?;
            if all.remove(provider_id).is_some() {
                self.write_all(provider_id, &all)?;
            }
            Ok(())
        })
    }
}
