//! The stateful pi agent.
//!
//! [`Agent`] wraps the stateless loop of [`pi_loop`] the way the reference's `Agent` class
//! of `@earendil-works/pi-agent-core` does: it owns the transcript and the tools, runs one
//! prompt at a time, reduces every event into its [`AgentState`], awaits its listeners, and
//! queues steering and follow-up messages typed while it works.
//!
//! * **Runs** — [`Agent::prompt`] and [`Agent::continue_run`] start a run at once on the
//!   current Tokio runtime and return a [`RunHandle`]; awaiting it waits for the run to
//!   settle. Dropping the handle aborts the run as [`Agent::abort`] would (the run still
//!   reports its end and the agent returns to idle). A second run while one is active is
//!   refused with the reference's error text. Model and hook failures end the run with a
//!   failure message, they are not `Err`s of the handle.
//! * **State** — [`Agent::state`] (and the single-field accessors) can be read any time,
//!   from any task or from inside a listener, without waiting for the run. Snapshots share
//!   the transcript (`Arc`), so reading per event copies nothing.
//! * **Listeners** — [`Agent::subscribe`] registers an async listener, awaited in order for
//!   every event. As in the reference it stays until [`Subscription::unsubscribe`] or until
//!   the agent is dropped; dropping the [`Subscription`] does not silence it.
//! * **Queues** — [`Agent::steer`] and [`Agent::follow_up`], drained per [`QueueMode`].
//! * **Stream function** — the reference falls back to a process-wide default stream
//!   function; Rust has no such global, so [`AgentOptions::new`] takes one explicitly.
//! * **Hooks** — set on [`AgentOptions`] with the setters of [`SetHooks`], taking ordinary
//!   closures (`.before_tool_call(|ctx, cancel| ...)`); they are the loop's [`pi_loop::Hooks`].
//! * **Sessions** — a [`Session`] keeps the transcript in a [`SessionStore`] (by default a
//!   [`FileStore`]: one JSON message per line), appended as messages end, with optimistic
//!   concurrency between workers; [`SavedSession::resume`] continues it after a restart.
//! * **Usage** — [`Agent::usage`]: tokens and cost of the current run and of every run.
//! * **Retry** — [`AgentOptions::with_retry`]: runs that fail with a transient provider error
//!   (rate limit, overload, 5xx, dropped connection) are retried with backoff ([`RetryPolicy`]),
//!   after the delay the server asked for (`retry-after`) when it asked for one.
//! * **HTTP** — an agent's own client, headers, time limits and key ([`RequestSettings`]:
//!   [`AgentOptions::with_http_client`], `with_request_header`, `with_timeouts`,
//!   `with_key_source`), over the provider's defaults.
//! * **Re-exports** — [`pi_types`] (every type in the signatures), [`pi_loop`] (the hooks'
//!   contexts and answers), [`CancellationToken`] and [`schemars`] with [`JsonSchema`], so an
//!   application needs no other pi dependency for typed tools and hooks. With the `derive` feature, `#[derive(pi_agent::JsonSchema)]` works too
//!   (add `#[schemars(crate = "pi_agent::schemars")]` when `schemars` is no direct dependency).
//!
//! ```
//! use std::sync::Arc;
//! use pi_agent::{Agent, AgentOptions};
//! use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
//! use pi_types::{AgentEvent, AssistantMessageEvent, StopReason};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let faux = FauxProvider::default();
//! faux.set_responses([FauxResponse::Message(faux_assistant_message(vec![faux_text("Hello!")], StopReason::Stop))]);
//! let agent = Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_system_prompt("Be brief.").with_model(faux.model()));
//! let _printer = agent.subscribe_fn(|event| {
//!     if let AgentEvent::MessageUpdate { assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. }, .. } = event {
//!         print!("{delta}");
//!     }
//! });
//! agent.prompt("Hi").await.unwrap();
//! assert_eq!(agent.messages().len(), 3); // system prompt, user, assistant
//! assert_eq!(agent.system_prompt(), "Be brief.");
//! assert!(!agent.is_streaming());
//! # });
//! ```
//!
//! # An agent on a real server
//!
//! Any OpenAI-compatible server (Ollama, vLLM, llama.cpp, a gateway) is a registry provider:
//! a [`pi_types::Model`] with the server's `base_url` and the adapter's `api`, and the key
//! the server expects (any value for one that checks none). The registry
//! (`pi_providers::Models`) is the agent's stream function. Here the server is a loopback
//! one answering one streamed completion, so that the example runs as it is:
//!
//! ```
//! use std::io::{Read, Write};
//! use std::sync::Arc;
//! use pi_agent::{Agent, AgentOptions};
//! use pi_providers::api::openai::completions;
//! use pi_providers::{Auth, Models, Provider};
//! use pi_types::{AgentMessage, Model};
//!
//! // A stand-in for your server: one chat-completions stream saying "Hi there."
//! let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
//! let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
//! std::thread::spawn(move || {
//!     let (mut stream, _) = listener.accept().unwrap();
//!     let mut request = [0u8; 65536];
//!     let _ = stream.read(&mut request);
//!     let chunk = |delta: &str, finish: &str| format!(
//!         "data: {{\"id\":\"c1\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n");
//!     let body = chunk(r#"{"role":"assistant","content":"Hi there."}"#, "null") + &chunk("{}", r#""stop""#);
//!     let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
//!     let _ = stream.write_all(format!("{head}{body}data: [DONE]\n\n").as_bytes());
//! });
//!
//! // Your server: its URL, the adapter, the model id it serves, and its key.
//! let model = Model::new("qwen3").with_provider("my-server").with_api(completions::API).with_base_url(base_url);
//! let models = Models::new();
//! models.set_provider(
//!     Provider::new("my-server").with_auth(Auth::ApiKey("none".into())).with_model(model.clone()).with_http_apis(),
//! );
//! let agent = Agent::new(AgentOptions::new(Arc::new(models)).with_model(model).with_system_prompt("Be brief."));
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! agent.prompt("Hello").await.unwrap();
//! # });
//! let Some(AgentMessage::Assistant(answer)) = agent.messages().last().cloned() else { panic!("no answer") };
//! assert_eq!(answer.error_message, None);
//! assert_eq!(answer.text(), "Hi there.");
//! ```
//!
//! A server in the catalog's providers (`Provider::builtin("openai")`, ...) brings its models
//! and key variables; `Auth` also takes a key from the environment or a hook.
//!
//! # Steering, follow-ups, abort and waiting for idle
//!
//! [`Agent::steer`] and [`Agent::follow_up`] take any message, or plain text (a user message,
//! like [`Agent::prompt`] builds). Steering is delivered at the next turn boundary of the
//! active run; a follow-up only once the agent would otherwise stop. [`Agent::abort`] cancels
//! the active run, which still ends with `agent_end` and an aborted message;
//! [`Agent::wait_for_idle`] resolves once the run settled, also for a detached run.
//!
//! Cancellation is cooperative, as in the reference: the run's token goes to every request
//! ([`StreamOptions::cancel`](pi_types::StreamOptions::cancel)) and every tool call, and the
//! loop stops nothing by itself. The built-in providers end their response as aborted as soon
//! as the token is cancelled, which ends the run; a provider or a tool of your own has to watch
//! the token (`is_cancelled`, `cancelled().await`) for an abort to take effect before it
//! finishes.
//!
//! ```
//! use std::sync::Arc;
//! use pi_agent::{Agent, AgentOptions};
//! use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
//! use pi_types::{AgentMessage, StopReason};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let reply = |text: &str| FauxResponse::Message(faux_assistant_message(vec![faux_text(text)], StopReason::Stop));
//! let faux = FauxProvider::default();
//! faux.set_responses([reply("12°C in Oslo."), reply("Tomorrow: 14°C.")]);
//! let agent = Agent::new(AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()));
//!
//! let run = agent.prompt("Weather in Oslo?"); // the run starts now
//! agent.steer("Use metric units."); // reaches the model with the prompt's turn
//! agent.follow_up("And tomorrow?"); // asked once the first answer is done
//! run.await.unwrap();
//! let texts: Vec<String> = agent.messages().iter().map(|m| match m {
//!     AgentMessage::User(user) => format!("user: {}", user.content.text()),
//!     AgentMessage::Assistant(reply) => format!("assistant: {}", reply.text()),
//!     other => other.role().to_owned(),
//! }).collect();
//! assert_eq!(texts, [
//!     "user: Weather in Oslo?",
//!     "user: Use metric units.",
//!     "assistant: 12°C in Oslo.",
//!     "user: And tomorrow?",
//!     "assistant: Tomorrow: 14°C.",
//! ]);
//!
//! // Abort: the run ends at once with an aborted assistant message.
//! faux.set_responses([reply("A very long essay ...")]);
//! agent.prompt("Write an essay.").detach(); // runs on without its handle
//! assert!(agent.is_streaming());
//! agent.abort();
//! agent.wait_for_idle().await;
//! assert!(!agent.is_streaming());
//! let last = agent.messages().last().and_then(|m| m.as_assistant().cloned()).unwrap();
//! assert_eq!(last.stop_reason, StopReason::Aborted);
//! # });
//! ```
//!
//! # A streaming provider of your own
//!
//! Anything that implements [`pi_types::StreamFn`] is a model, closures included. Build the
//! response with [`pi_types::AssistantMessageBuilder`]: it sends `start`, the block events and
//! one terminal `done` or `error`, each carrying the partial message so far (mutated in place
//! once the previous event was consumed, so streaming costs no copy per delta). Watch the
//! request's cancellation token: an abort ends the run only through the providers and tools
//! that honour it.
//!
//! ```
//! use std::sync::Arc;
//! use pi_agent::{Agent, AgentOptions};
//! use pi_types::{
//!     AssistantMessageBuilder, AssistantMessageEvent as Event, AssistantMessageEventStream, Model, StopReason,
//!     StreamOptions, TranscriptContext,
//! };
//!
//! /// Streams the last user text back, word by word.
//! fn echo(model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
//!     let words: Vec<String> = context.messages().iter().rev().find_map(|m| match m {
//!         pi_types::Message::User(user) => Some(user.content.text()),
//!         _ => None,
//!     }).unwrap_or_default().split_inclusive(' ').map(str::to_owned).collect();
//!     let model = model.clone();
//!     AssistantMessageEventStream::from_producer(move |tx| async move {
//!         let mut out = AssistantMessageBuilder::for_model(tx, &model);
//!         let cancelled = || options.cancel.as_ref().is_some_and(|token| token.is_cancelled());
//!         out.start().await;
//!         let text = out.start_text().await;
//!         for word in words {
//!             if cancelled() {
//!                 return out.aborted("Request was aborted").await;
//!             }
//!             out.text_delta(text, &word).await.expect("an open text block");
//!         }
//!         out.end_text(text).await.expect("an open text block");
//!         out.done(StopReason::Stop).await;
//!     })
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let model = Model::new("echo-1").with_api("echo").with_provider("local");
//! let agent = Agent::new(AgentOptions::new(Arc::new(echo)).with_model(model));
//! let deltas = Arc::new(std::sync::Mutex::new(0));
//! let counter = Arc::clone(&deltas);
//! agent.subscribe_fn(move |event| {
//!     if let pi_types::AgentEvent::MessageUpdate { assistant_message_event: Event::TextDelta { .. }, .. } = event {
//!         *counter.lock().unwrap() += 1;
//!     }
//! });
//! agent.prompt("say it back").await.unwrap();
//! assert_eq!(*deltas.lock().unwrap(), 3);
//! let reply = agent.messages().last().and_then(|m| m.as_assistant().cloned()).unwrap();
//! assert_eq!(reply.text(), "say it back");
//! # });
//! ```

mod agent;
mod error;
mod file_store;
mod options;
mod pending;
mod request;
mod retry;
mod session;
mod settings;
mod state;
mod store;
mod usage;

pub use agent::{Agent, Listener, PromptInput, RunHandle, Subscription, WeakAgent};
pub use error::AgentError;
pub use file_store::FileStore;
pub use options::{default_model, AgentInitialState, AgentOptions, QueueMode};
pub use pending::PendingToolCalls;
pub use request::{KeySource, RequestSettings};
pub use retry::{RetryClassifier, RetryEvent, RetryObserver, RetryPolicy};
pub use session::{SavedSession, Session};
pub use state::{AgentState, StreamingMessage};
pub use store::{SessionStore, SessionSummary, SessionWrite, StoredSession};
pub use usage::{UsageTotal, UsageTotals};

pub use pi_loop;
/// The hook setters of [`AgentOptions`] (`before_tool_call`, `finish_turn`, ...), from pi-loop.
pub use pi_loop::SetHooks;
pub use pi_types;
pub use pi_types::CancellationToken;
pub use schemars;
pub use schemars::JsonSchema;
