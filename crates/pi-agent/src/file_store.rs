//! The default [`SessionStore`]: one JSONL file per session in a directory.
//!
//! # Format
//! The session `id` is the file's name in the store's directory. UTF-8 text, one
//! [`AgentMessage`] per line in the reference's JSON wire shape, each line ended by `\n`: the
//! format of `agent.state.messages` written with `JSON.stringify` line by line. The lifetime
//! usage totals are kept beside it in `ID.usage.json` (a file without one, written before
//! totals were kept, gets the sum of its assistant messages' usage).
//!
//! # Writing
//! Appends add whole lines with one `write` to the end of the file; rewrites write a
//! temporary file beside it and rename it over the old one, so a file is never half old, half
//! new. With [`FileStore::durable`] every write is also flushed to the disk (`fsync`), which a
//! machine crash needs too (a killed process needs none).
//!
//! # Versions and concurrency
//! A session's version is its file's length in bytes. Each write holds an exclusive lock on
//! the file (`flock`, released when the writer closes it or dies) while it checks the version
//! and writes, so of two processes writing the same session one wins and the other gets
//! [`AgentError::SessionConflict`]. A rewrite replaces the file, which the lock of a writer
//! still holding the old one detects (on Unix, by the file's inode). A rewrite to exactly the
//! length a stale writer last saw is not detected; the databases' stores count versions.
//!
//! # Loading
//! A last line without its `\n` is what a crash mid-write leaves: it is dropped, the file is
//! cut back to its last whole line, and a warning says so. Any other line that is not a
//! message is an error ([`AgentError::SessionCorrupt`]) naming the line: damage, not a crash.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use futures::future::BoxFuture;
use pi_types::AgentMessage;

use crate::error::AgentError;
use crate::store::{SessionStore, SessionSummary, SessionWrite, StoredSession};
use crate::usage::UsageTotal;

/// Sessions as JSONL files in a directory (the format: `docs/sessions.md`).
#[derive(Debug)]
pub struct FileStore {
    dir: PathBuf,
    durable: bool,
    /// The totals last saved per session, so that a write whose totals did not change leaves
    /// the totals file alone.
    saved_usage: Mutex<HashMap<String, UsageTotal>>,
}

/// What is listed: session files end with this.
const EXTENSION: &str = ".jsonl";
/// The totals file of session `ID` is `ID` followed by this.
const USAGE_SUFFIX: &str = ".usage.json";

impl FileStore {
    /// The sessions in `dir` (created on the first write when missing).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FileStore { dir: dir.into(), durable: false, saved_usage: Mutex::default() }
    }

    /// The store of the session file `path` and the session's id in it (the file's name).
    pub fn for_file(path: impl AsRef<Path>) -> (Self, String) {
        let path = path.as_ref();
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let id = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        (FileStore::new(dir), id)
    }

    /// Flush every write to the disk (`fsync`) before it returns: slower, but the sessions
    /// also survive a crash of the machine.
    pub fn durable(mut self) -> Self {
        self.durable = true;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of session `id`; ids are plain file names.
    pub fn path_of(&self, id: &str) -> Result<PathBuf, AgentError> {
        let plain = !id.is_empty() && id != "." && id != ".." && !id.contains(['/', '\\', '\0']);
        match plain {
            true => Ok(self.dir.join(id)),
            false => Err(AgentError::SessionIo {
                path: format!("{}/{id}", self.dir.display()),
                reason: "a session id is a file name, without `/`".into(),
            }),
        }
    }

    /// [`SessionStore::load`] without a future (files need none).
    pub fn load_now(&self, id: &str) -> Result<StoredSession, AgentError> {
        let path = self.path_of(id)?;
        let io = io_error(&path);
        let mut file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(StoredSession::default()),
            Err(error) => return Err(io(error)),
        };
        // Locked: a torn line is cut only while no other writer appends.
        file.lock().map_err(io)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map_err(io)?;
        let (mut stored, whole) = parse(&path, &bytes)?;
        if whole < bytes.len() {
            file.set_len(whole as u64).map_err(io)?;
        }
        stored.version = whole as u64;
        stored.usage = match std::fs::read(usage_path(&path)) {
            Ok(json) => serde_json::from_slice(&json).map_err(|error| AgentError::SessionIo {
                path: usage_path(&path).display().to_string(),
                reason: error.to_string(),
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => sum_of(&stored.messages),
            Err(error) => return Err(io(error)),
        };
        self.remember(id, &stored.usage);
        Ok(stored)
    }

    fn write_now(&self, id: &str, write: SessionWrite<'_>, rewrite: bool) -> Result<u64, AgentError> {
        let path = self.path_of(id)?;
        let io = io_error(&path);
        if write.version == 0 {
            std::fs::create_dir_all(&self.dir).map_err(io)?;
        }
        let mut file = OpenOptions::new().create(true).append(true).open(&path).map_err(io)?;
        file.lock().map_err(io)?;
        if !is_current(&path, &file, write.version).map_err(io)? {
            return Err(AgentError::SessionConflict { session: path.display().to_string() });
        }
        let from = if rewrite { 0 } else { write.from };
        let mut text = Vec::new();
        for message in write.messages.iter_from(from) {
            serde_json::to_writer(&mut text, message).map_err(|error| io(error.into()))?;
            text.push(b'\n');
        }
        let length = if rewrite {
            let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
            name.push(".tmp");
            let temporary = path.with_file_name(name);
            let mut replacement = File::create(&temporary).map_err(io)?;
            replacement.write_all(&text).map_err(io)?;
            replacement.sync_data().map_err(io)?;
            std::fs::rename(&temporary, &path).map_err(io)?;
            text.len() as u64
        } else {
            file.write_all(&text).map_err(io)?;
            if self.durable {
                file.sync_data().map_err(io)?;
            }
            write.version.saturating_add(text.len() as u64)
        };
        self.save_usage(id, &path, write.usage)?;
        Ok(length)
    }

    fn save_usage(&self, id: &str, path: &Path, usage: &UsageTotal) -> Result<(), AgentError> {
        if self.lock_usage().get(id) == Some(usage) {
            return Ok(());
        }
        let target = usage_path(path);
        let io = io_error(&target);
        let json = serde_json::to_vec(usage).map_err(|error| io(error.into()))?;
        let mut name = target.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".tmp");
        let temporary = target.with_file_name(name);
        std::fs::write(&temporary, json).map_err(io)?;
        std::fs::rename(&temporary, &target).map_err(io)?;
        self.remember(id, usage);
        Ok(())
    }

    fn remember(&self, id: &str, usage: &UsageTotal) {
        self.lock_usage().insert(id.to_owned(), usage.clone());
    }

    fn lock_usage(&self) -> std::sync::MutexGuard<'_, HashMap<String, UsageTotal>> {
        self.saved_usage.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn list_now(&self) -> Result<Vec<SessionSummary>, AgentError> {
        let io = io_error(&self.dir);
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io(error)),
        };
        let mut sessions = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io)?;
            let id = entry.file_name().to_string_lossy().into_owned();
            if !id.ends_with(EXTENSION) || !entry.file_type().map_err(io)?.is_file() {
                continue;
            }
            let path = entry.path();
            let bytes = std::fs::read(&path).map_err(io_error(&path))?;
            let (stored, _) = parse(&path, &bytes)?;
            let usage = std::fs::read(usage_path(&path))
                .ok()
                .and_then(|json| serde_json::from_slice::<UsageTotal>(&json).ok())
                .unwrap_or_else(|| sum_of(&stored.messages));
            let modified = entry.metadata().and_then(|m| m.modified()).map_err(io_error(&path))?;
            let updated_ms = modified.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
            sessions.push(SessionSummary {
                id,
                updated_ms,
                messages: stored.messages.len() as u64,
                cost: usage.usage.cost.total,
            });
        }
        sessions.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then_with(|| a.id.cmp(&b.id)));
        Ok(sessions)
    }

    fn delete_now(&self, id: &str) -> Result<(), AgentError> {
        let path = self.path_of(id)?;
        for file in [usage_path(&path), path.clone()] {
            match std::fs::remove_file(&file) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(io_error(&file)(error)),
            }
        }
        self.lock_usage().remove(id);
        Ok(())
    }
}

impl SessionStore for FileStore {
    fn load<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<StoredSession, AgentError>> {
        Box::pin(async move { self.load_now(id) })
    }

    fn append<'a>(&'a self, id: &'a str, write: SessionWrite<'a>) -> BoxFuture<'a, Result<u64, AgentError>> {
        Box::pin(async move { self.write_now(id, write, false) })
    }

    fn rewrite<'a>(&'a self, id: &'a str, write: SessionWrite<'a>) -> BoxFuture<'a, Result<u64, AgentError>> {
        Box::pin(async move { self.write_now(id, write, true) })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<SessionSummary>, AgentError>> {
        Box::pin(async move { self.list_now() })
    }

    fn delete<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), AgentError>> {
        Box::pin(async move { self.delete_now(id) })
    }
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> AgentError + Copy + '_ {
    move |error| AgentError::SessionIo { path: path.display().to_string(), reason: error.to_string() }
}

fn usage_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(USAGE_SUFFIX);
    path.with_file_name(name)
}

/// Whether the locked `file` is still the session's file at `version` bytes.
fn is_current(path: &Path, file: &File, version: u64) -> std::io::Result<bool> {
    let held = file.metadata()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let named = std::fs::metadata(path)?;
        if (named.dev(), named.ino()) != (held.dev(), held.ino()) {
            return Ok(false);
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(held.len() == version)
}

/// The lifetime totals of a transcript saved without them: its assistant messages' usage.
fn sum_of(messages: &[AgentMessage]) -> UsageTotal {
    let mut total = UsageTotal::default();
    for message in messages {
        if let Some(assistant) = message.as_assistant() {
            total.add(&assistant.usage);
        }
    }
    total
}

/// The messages of a file's bytes and how many bytes are whole lines.
fn parse(path: &Path, bytes: &[u8]) -> Result<(StoredSession, usize), AgentError> {
    let mut stored = StoredSession::default();
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if whole < bytes.len() {
        stored.warnings.push(format!(
            "session {}: dropped an unfinished last line ({} bytes), left by a process that stopped while writing it",
            path.display(),
            bytes.len() - whole
        ));
    }
    for (index, line) in bytes[..whole].split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let message = serde_json::from_slice(line).map_err(|error| AgentError::SessionCorrupt {
            path: path.display().to_string(),
            line: index + 1,
            reason: error.to_string(),
        })?;
        stored.messages.push(message);
    }
    Ok((stored, whole))
}
