//! Sessions that survive a restart: an agent's transcript kept in a [`SessionStore`] as it
//! grows.
//!
//! # Writing
//! A [`Session`] attached to an agent ([`Session::attach`]) follows its transcript: when a
//! message ends (`message_end`) and when a run ends (`agent_end`), the messages the transcript
//! gained since the last write are appended with the agent's lifetime usage totals. A process
//! killed mid-stream (even `kill -9`) loses at most the message in flight. When the transcript
//! changed otherwise ([`Agent::set_messages`], [`Agent::reset`], a failed response removed for
//! a retry), the whole session is rewritten.
//!
//! A write that fails (disk full, database down) stops the writing; [`Session::error`] tells
//! why and the agent runs on: a session is a record of the conversation, not part of it. The
//! exception is [`AgentError::SessionConflict`]: another worker wrote the session since this
//! one loaded it, so this agent's transcript is stale. The listener then fails the run (a
//! failure message, `agent_end`), so that no run goes on over a stale transcript; the session
//! stays stopped, and the worker loads it anew to continue.
//!
//! # Loading
//! [`Session::open`] reads a session file ([`FileStore`]); [`Session::load`] any store. What
//! was repaired while loading (a torn last line) is in [`SavedSession::warnings`].
//!
//! # The system prompt on resume
//! A saved transcript starts with its system message (prompt and tool baseline), which the
//! agent replays. [`SavedSession::resume`] therefore refuses options whose system prompt
//! differs from the saved one ([`AgentError::SystemPromptChanged`]) instead of ignoring it;
//! with no prompt in the options, or the same one, the saved prompt applies. Tools may differ:
//! the next run declares the changes to the model, as [`Agent::set_tools`] would. The saved
//! lifetime usage totals become the agent's ([`Agent::usage`]).

use std::path::Path;
use std::sync::Arc;

use pi_types::transcript::current_system_prompt;
use pi_types::{AgentEvent, AgentMessage, BoxError};

use crate::agent::{Agent, Subscription};
use crate::error::AgentError;
use crate::file_store::FileStore;
use crate::options::AgentOptions;
use crate::store::{SessionStore, SessionWrite, StoredSession};
use crate::usage::UsageTotal;

/// An agent's transcript kept in a [`SessionStore`] (the default: a JSONL file, see
/// `docs/sessions.md`).
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
/// let _recording = session.attach(&agent).await.unwrap();
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
    inner: Arc<Recorder>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.inner.id).finish_non_exhaustive()
    }
}

/// What [`Session::open`] or [`Session::load`] found.
#[derive(Clone, Debug, Default)]
pub struct SavedSession {
    /// The saved transcript, in order.
    pub messages: Vec<AgentMessage>,
    /// The lifetime usage totals saved with it.
    pub usage: UsageTotal,
    /// What was repaired while loading (a torn last line dropped).
    pub warnings: Vec<String>,
}

struct Recorder {
    store: Arc<dyn SessionStore>,
    id: String,
    state: tokio::sync::Mutex<Written>,
    /// The first write failure, after which nothing more is written.
    failure: std::sync::Mutex<Option<AgentError>>,
}

/// What the store holds, as far as this writer knows.
struct Written {
    /// The version of the last write (or of the load).
    version: u64,
    /// How many messages of the transcript are saved.
    count: usize,
    /// The last of them, to tell whether the transcript still continues the saved one.
    last: Option<AgentMessage>,
    /// Whether a write failed (see `Recorder::failure`).
    stopped: bool,
}

impl Session {
    /// Open the session file at `path` ([`FileStore::for_file`]), and load what it holds
    /// (nothing when it does not exist yet; it is created on the first write).
    pub fn open(path: impl AsRef<Path>) -> Result<(Session, SavedSession), AgentError> {
        let (store, id) = FileStore::for_file(path);
        let stored = store.load_now(&id)?;
        Ok(Session::from_stored(Arc::new(store), id, stored))
    }

    /// Load the session `id` of `store` (empty when there is none yet).
    pub async fn load(
        store: Arc<dyn SessionStore>,
        id: impl Into<String>,
    ) -> Result<(Session, SavedSession), AgentError> {
        let id = id.into();
        let stored = store.load(&id).await?;
        Ok(Session::from_stored(store, id, stored))
    }

    fn from_stored(store: Arc<dyn SessionStore>, id: String, stored: StoredSession) -> (Session, SavedSession) {
        let StoredSession { messages, usage, version, warnings } = stored;
        let written = Written { version, count: messages.len(), last: messages.last().cloned(), stopped: false };
        let inner =
            Arc::new(Recorder { store, id, state: tokio::sync::Mutex::new(written), failure: Default::default() });
        (Session { inner }, SavedSession { messages, usage, warnings })
    }

    /// The session's id in its store.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.inner.store
    }

    /// Keep `agent`'s transcript in the store from now on: what it holds already is written
    /// at once, later messages as they end. Stops with [`Subscription::unsubscribe`].
    pub async fn attach(&self, agent: &Agent) -> Result<Subscription, AgentError> {
        self.inner.follow(agent).await?;
        let recorder = Arc::clone(&self.inner);
        let weak = agent.downgrade();
        Ok(agent.subscribe(move |event, _cancel| {
            let recorder = Arc::clone(&recorder);
            let weak = weak.clone();
            let follows = matches!(event, AgentEvent::MessageEnd { .. } | AgentEvent::AgentEnd { .. });
            Box::pin(async move {
                if let (true, Some(agent)) = (follows, weak.upgrade()) {
                    recorder.follow(&agent).await.map_err(|error| Box::new(error) as BoxError)?;
                }
                Ok(())
            })
        }))
    }

    /// Why writing stopped, if it did.
    pub fn error(&self) -> Option<AgentError> {
        self.inner.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl SavedSession {
    /// The system prompt the saved transcript replays.
    pub fn system_prompt(&self) -> String {
        current_system_prompt(self.messages.iter())
    }

    /// An agent with `options` that continues the saved transcript and usage totals. A new
    /// (empty) session takes `options` as they are; a saved one keeps its system prompt, and
    /// options with a different one are refused ([`AgentError::SystemPromptChanged`]; see
    /// `docs/sessions.md`).
    pub fn resume(self, options: AgentOptions) -> Result<Agent, AgentError> {
        let starts_with_system = matches!(self.messages.first(), Some(AgentMessage::System(_)));
        if let (true, Some(given)) = (starts_with_system, options.initial_state.system_prompt.as_deref()) {
            let saved = self.system_prompt();
            if given != saved {
                return Err(AgentError::SystemPromptChanged { saved, given: given.to_owned() });
            }
        }
        Ok(Agent::new(options.with_messages(self.messages).with_usage(self.usage)))
    }
}

impl Recorder {
    /// Bring the store to the agent's transcript: append what is new, or rewrite it when the
    /// transcript no longer continues what was written. Only a conflict is an `Err` (it fails
    /// the run); other failures stop the writing quietly.
    async fn follow(&self, agent: &Agent) -> Result<(), AgentError> {
        let mut written = self.state.lock().await;
        if written.stopped {
            return Ok(());
        }
        let messages = agent.messages();
        let usage = agent.usage().total;
        let continues = written.count <= messages.len()
            && match written.count.checked_sub(1) {
                None => true,
                Some(last) => messages.get(last) == written.last.as_ref(),
            };
        if continues && written.count == messages.len() {
            return Ok(());
        }
        let write = SessionWrite { version: written.version, messages: &messages, from: written.count, usage: &usage };
        let outcome = match continues {
            true => self.store.append(&self.id, write).await,
            false => self.store.rewrite(&self.id, SessionWrite { from: 0, ..write }).await,
        };
        match outcome {
            Ok(version) => {
                written.version = version;
                written.count = messages.len();
                written.last = messages.last().cloned();
                Ok(())
            }
            Err(error) => {
                written.stopped = true;
                *self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(error.clone());
                match error {
                    AgentError::SessionConflict { .. } => Err(error),
                    _ => Ok(()),
                }
            }
        }
    }
}
