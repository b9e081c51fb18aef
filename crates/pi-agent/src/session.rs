//! Sessions that survive a restart: an agent's transcript in a file, one message per line.
//!
//! # Format
//! UTF-8 text, one [`AgentMessage`] per line in the reference's JSON wire shape, each line
//! ended by `\n`: the format of `agent.state.messages` written with `JSON.stringify` line by line.
//!
//! # Writing
//! A [`Session`] attached to an agent ([`Session::attach`]) follows its transcript: when a
//! message ends (`message_end`) and when a run ends (`agent_end`), the messages the transcript
//! gained since the last write are appended, each line with one write. A process killed
//! mid-stream (even `kill -9`) loses at most the message in flight. With
//! [`Session::durable`], each write is also flushed to the disk (`fsync`), which an OS crash
//! needs too. When the transcript changed otherwise ([`Agent::set_messages`],
//! [`Agent::reset`], a failed response removed for a retry), the whole file is rewritten
//! beside itself and renamed over the old one, so it is never half old, half new.
//!
//! A write that fails (disk full, file removed) stops the writing; [`Session::error`] tells
//! why. The agent runs on: a session is a record of the conversation, not part of it.
//!
//! # Loading
//! [`Session::open`] reads what a previous process wrote. A last line without its `\n` is
//! what a crash mid-write leaves: it is dropped, the file is cut back to the last whole line,
//! and a warning says so ([`SavedSession::warnings`]). Any other line that is not a message is
//! an error ([`AgentError::SessionCorrupt`]) naming the line: that is damage, not a crash.
//!
//! # The system prompt on resume
//! A saved transcript starts with its system message (prompt and tool baseline), which the
//! agent replays. [`SavedSession::resume`] therefore refuses options whose system prompt
//! differs from the saved one ([`AgentError::SystemPromptChanged`]) instead of ignoring it;
//! with no prompt in the options, or the same one, the saved prompt applies. Tools may differ:
//! the next run declares the changes to the model, as [`Agent::set_tools`] would.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pi_types::transcript::current_system_prompt;
use pi_types::{AgentEvent, AgentMessage};

use crate::agent::{Agent, Subscription};
use crate::error::AgentError;
use crate::options::AgentOptions;

/// A session file an agent's transcript is kept in (the format: `docs/sessions.md`).
///
/// ```
/// use std::sync::Arc;
/// use pi_agent::{Agent, AgentOptions, Session};
/// use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
/// use pi_types::StopReason;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let path = std::env::temp_dir().join(format!("pi-session-doc-{}.jsonl", std::process::id()));
/// # let _ = std::fs::remove_file(&path);
/// let faux = FauxProvider::default();
/// faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text("Hi!")], StopReason::Stop))]);
/// let options = || AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()).with_system_prompt("Be brief.");
///
/// // First process: a new session.
/// let (session, saved) = Session::open(&path).unwrap();
/// let agent = saved.resume(options()).unwrap();
/// let _recording = session.attach(&agent);
/// agent.prompt("Hello").await.unwrap();
///
/// // Later: the same conversation, from the file.
/// let (_session, saved) = Session::open(&path).unwrap();
/// assert_eq!(saved.messages.len(), 3); // system prompt, user, assistant
/// let agent = saved.resume(options()).unwrap();
/// assert_eq!(agent.messages().len(), 3);
/// # std::fs::remove_file(&path).unwrap();
/// # });
/// ```
#[derive(Clone)]
pub struct Session {
    inner: Arc<Writer>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("path", &self.inner.path).finish_non_exhaustive()
    }
}

/// What [`Session::open`] found in the file.
#[derive(Clone, Debug, Default)]
pub struct SavedSession {
    /// The saved transcript, in order.
    pub messages: Vec<AgentMessage>,
    /// What was repaired while loading (a torn last line dropped).
    pub warnings: Vec<String>,
}

struct Writer {
    path: PathBuf,
    durable: AtomicBool,
    state: Mutex<Written>,
}

/// What the file holds.
struct Written {
    /// Open for appending; `None` after a failure.
    file: Option<File>,
    /// How many messages of the transcript are in the file.
    count: usize,
    /// The last of them, to tell whether the transcript still continues the file.
    last: Option<AgentMessage>,
    /// The first write failure, after which nothing more is written.
    error: Option<String>,
}

impl Session {
    /// Open the session file at `path`, creating it (empty) when it does not exist, and load
    /// what it holds.
    pub fn open(path: impl AsRef<Path>) -> Result<(Session, SavedSession), AgentError> {
        let path = path.as_ref().to_path_buf();
        let io = |error: std::io::Error| AgentError::SessionIo {
            path: path.display().to_string(),
            reason: error.to_string(),
        };
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(io(error)),
        };
        let (saved, whole) = parse(&path, &bytes)?;
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(io)?;
        if whole < bytes.len() {
            file.set_len(whole as u64).map_err(io)?;
        }
        let written = Written {
            file: Some(file),
            count: saved.messages.len(),
            last: saved.messages.last().cloned(),
            error: None,
        };
        let inner = Arc::new(Writer { path, durable: AtomicBool::new(false), state: Mutex::new(written) });
        Ok((Session { inner }, saved))
    }

    /// Flush every write to the disk before the agent goes on (`fsync`): slower, but the file
    /// also survives a crash of the machine.
    pub fn durable(self) -> Self {
        self.inner.durable.store(true, Ordering::Relaxed);
        self
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Keep `agent`'s transcript in the file from now on: what it holds already is written at
    /// once, later messages as they end. Stops with [`Subscription::unsubscribe`].
    pub fn attach(&self, agent: &Agent) -> Subscription {
        self.inner.follow(&agent.messages());
        let writer = Arc::clone(&self.inner);
        let weak = agent.downgrade();
        agent.subscribe_fn(move |event| {
            if matches!(event, AgentEvent::MessageEnd { .. } | AgentEvent::AgentEnd { .. }) {
                if let Some(agent) = weak.upgrade() {
                    writer.follow(&agent.messages());
                }
            }
        })
    }

    /// Why writing stopped, if it did.
    pub fn error(&self) -> Option<String> {
        self.inner.lock().error.clone()
    }
}

impl SavedSession {
    /// The system prompt the saved transcript replays.
    pub fn system_prompt(&self) -> String {
        current_system_prompt(self.messages.iter())
    }

    /// An agent with `options` that continues the saved transcript. A new (empty) session
    /// takes `options` as they are; a saved one keeps its system prompt, and options with a
    /// different one are refused ([`AgentError::SystemPromptChanged`]; see `docs/sessions.md`).
    pub fn resume(self, options: AgentOptions) -> Result<Agent, AgentError> {
        let starts_with_system = matches!(self.messages.first(), Some(AgentMessage::System(_)));
        if let (true, Some(given)) = (starts_with_system, options.initial_state.system_prompt.as_deref()) {
            let saved = self.system_prompt();
            if given != saved {
                return Err(AgentError::SystemPromptChanged { saved, given: given.to_owned() });
            }
        }
        Ok(Agent::new(options.with_messages(self.messages)))
    }
}

impl Writer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Written> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Bring the file to `messages`: append what is new, or rewrite it when the transcript no
    /// longer continues what was written.
    fn follow(&self, messages: &pi_loop::MessageList) {
        let mut written = self.lock();
        if written.error.is_some() {
            return;
        }
        let continues = written.count <= messages.len()
            && match written.count.checked_sub(1) {
                None => true,
                Some(last) => messages.get(last) == written.last.as_ref(),
            };
        let outcome = match continues {
            true => self.append(&mut written, messages),
            false => self.rewrite(&mut written, messages),
        };
        if let Err(error) = outcome {
            written.file = None;
            written.error = Some(format!("writing session {}: {error}", self.path.display()));
        }
    }

    fn append(&self, written: &mut Written, messages: &pi_loop::MessageList) -> std::io::Result<()> {
        let Some(file) = written.file.as_mut() else { return Ok(()) };
        for message in messages.iter_from(written.count) {
            file.write_all(&line_of(message)?)?;
            if self.durable.load(Ordering::Relaxed) {
                file.sync_data()?;
            }
            written.count += 1;
            written.last = Some(message.clone());
        }
        Ok(())
    }

    fn rewrite(&self, written: &mut Written, messages: &pi_loop::MessageList) -> std::io::Result<()> {
        let mut name = self.path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".tmp");
        let temporary = self.path.with_file_name(name);
        let mut text = Vec::new();
        for message in messages.iter() {
            text.extend_from_slice(&line_of(message)?);
        }
        let mut file = File::create(&temporary)?;
        file.write_all(&text)?;
        file.sync_data()?;
        std::fs::rename(&temporary, &self.path)?;
        written.file = Some(OpenOptions::new().append(true).open(&self.path)?);
        written.count = messages.len();
        written.last = messages.last().cloned();
        Ok(())
    }
}

/// A message as one line of the file, `\n` included.
fn line_of(message: &AgentMessage) -> std::io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    Ok(line)
}

/// The messages of a file's bytes and how many bytes are whole lines.
fn parse(path: &Path, bytes: &[u8]) -> Result<(SavedSession, usize), AgentError> {
    let mut saved = SavedSession::default();
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if whole < bytes.len() {
        saved.warnings.push(format!(
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
        saved.messages.push(message);
    }
    Ok((saved, whole))
}
