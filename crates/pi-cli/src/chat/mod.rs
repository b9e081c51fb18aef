//! `pi chat`: an interactive session.
//!
//! A [`Session`] handles [`Input`]s (see [`input`]) while a run streams: a line typed
//! meanwhile is sent as a steering message, `/followup TEXT` queues a follow-up, `/abort` or
//! Ctrl-C aborts the run (dropping queued messages) and a second Ctrl-C exits; steering
//! that arrives too late for a run, and follow-ups, start the next run.

pub mod input;

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use pi_agent::{Agent, RunHandle};
use pi_types::UserMessage;
use tokio::sync::mpsc;

use crate::args::{ModelArgs, OutputMode};
use crate::error::CliError;
use crate::render::{stdout_colors, Renderer};
use crate::run::{attach, build_agent, lock, outcome, SharedRenderer, DEMO_NOTICE};
use crate::setup::Backend;
use input::{forward_interrupts, spawn_editor, spawn_line_reader, Input};

const HELP: &str = "\
commands:
  TEXT            prompt the agent (while it works: steer it; read after the current turn)
  /followup TEXT  queue TEXT for when the agent would stop
  /abort          abort the run (Ctrl-C too; a second Ctrl-C exits)
  /reset          clear the conversation (with --session: the file is kept as FILE.bak first)
  /continue       answer the last prompt again (after a run that ended without an answer)
  /model [ID]     show the model, or switch (ID, provider/ID or provider)
  /tools          list the tools
  /help           this list
  /exit           leave (Ctrl-D too)";

/// A chat session over an agent.
pub struct Session {
    agent: Agent,
    backend: Backend,
    renderer: SharedRenderer,
    run: Option<RunHandle>,
    interrupted: bool,
    mcp: crate::mcp::McpTools,
    /// The `--session` location (a file path, `sqlite:...` or `postgres://...`).
    session: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("running", &self.run.is_some()).finish_non_exhaustive()
    }
}

/// What to do after an input.
enum Next {
    Continue,
    /// Wait for the aborted run to settle before reading on, so that what is typed next
    /// is a new prompt, not steering for a dying run.
    Settle,
    Exit,
}

impl Session {
    /// A session on the backend, rendering to `out`.
    pub fn new(
        backend: Backend,
        args: &ModelArgs,
        mode: OutputMode,
        out: Box<dyn Write + Send>,
        color: bool,
    ) -> Result<Self, CliError> {
        let agent = build_agent(&backend, args)?;
        let renderer = Arc::new(Mutex::new(Renderer::new(mode, out, color)));
        // The listener lives as long as the agent (see `Subscription`).
        let _listener = attach(&agent, &renderer);
        let mcp = crate::mcp::McpTools::start(&args.mcp, &agent)?;
        Ok(Self { agent, backend, renderer, run: None, interrupted: false, mcp, session: args.session.clone() })
    }

    fn say(&self, text: &str) {
        lock(&self.renderer).notice(text);
    }

    fn model_name(&self) -> String {
        let model = self.agent.model();
        format!("{}/{}", model.provider, model.id)
    }

    fn greet(&self) {
        if self.backend.is_demo() && self.backend.proxy.is_none() {
            self.say(DEMO_NOTICE);
        }
        self.say(&format!("pi chat on {} — /help for commands, Ctrl-D to leave", self.model_name()));
    }

    fn interrupt(&mut self) -> Next {
        if self.interrupted {
            return Next::Exit;
        }
        self.interrupted = true;
        if self.run.is_some() {
            self.agent.abort();
            self.say("(aborting — Ctrl-C again to exit)");
            return Next::Settle;
        }
        self.say("(Ctrl-C again or Ctrl-D to exit)");
        Next::Continue
    }

    fn line(&mut self, line: String) -> Next {
        let text = line.trim();
        if text.is_empty() {
            return Next::Continue;
        }
        self.interrupted = false;
        let (command, rest) = match text.split_once(char::is_whitespace) {
            Some((command, rest)) => (command, rest.trim()),
            None => (text, ""),
        };
        match command {
            "/exit" | "/quit" => return Next::Exit,
            "/help" => self.say(HELP),
            "/abort" => {
                if self.run.is_some() {
                    self.agent.abort();
                    return Next::Settle;
                }
                self.say("(nothing to abort)");
            }
            "/followup" if rest.is_empty() => self.say("usage: /followup TEXT"),
            "/followup" => {
                if self.run.is_some() {
                    self.agent.follow_up(UserMessage::text(rest));
                    self.say("(follow-up queued)");
                } else {
                    self.start(rest.to_owned());
                }
            }
            "/reset" => self.reset(),
            "/continue" if self.run.is_some() => self.say("(busy: the agent is answering)"),
            "/continue" if crate::session::is_unanswered(self.agent.messages().last()) => {
                self.sync_mcp_tools();
                self.run = Some(self.agent.continue_run());
            }
            "/continue" => self.say("(nothing to continue: the last message is an answer)"),
            "/model" if rest.is_empty() => self.say(&format!("model: {}", self.model_name())),
            "/model" => match self.backend.switch(rest) {
                Ok(model) => {
                    self.agent.set_model(model);
                    self.say(&format!("(model: {})", self.model_name()));
                }
                Err(error) => self.say(&format!("error: {}", error.one_line())),
            },
            "/tools" => {
                self.sync_mcp_tools();
                self.say(&self.mcp.describe(&self.agent));
            }
            _ if command.starts_with('/') => self.say(&format!("unknown command {command} (/help lists them)")),
            _ => {
                if self.run.is_some() {
                    self.agent.steer(UserMessage::text(text));
                    self.say("(steering: read after the current turn)");
                } else {
                    self.start(text.to_owned());
                }
            }
        }
        Next::Continue
    }

    /// `/reset`: clear the conversation; a session file is copied first, so the old
    /// conversation stays recoverable.
    fn reset(&mut self) {
        if self.run.is_some() {
            return self.say("(busy: /abort first, then /reset)");
        }
        // A session file is copied before the reset; a database session's rows are rewritten.
        let file =
            self.session.as_deref().filter(|url| !pi_store::Location::is_database(url)).map(std::path::Path::new);
        let kept = match file.filter(|path| path.exists()) {
            Some(path) => match crate::session::keep_copy(path) {
                Ok(copy) => Some(copy),
                Err(error) => {
                    return self.say(&format!("error: {}; the conversation is not cleared", error.one_line()))
                }
            },
            None => None,
        };
        match (self.agent.reset(), kept) {
            (Ok(()), Some(copy)) => self.say(&format!("(conversation cleared; the old one is in {})", copy.display())),
            (Ok(()), None) => self.say("(conversation cleared)"),
            (Err(_), _) => self.say("(busy: /abort first, then /reset)"),
        }
    }

    fn start(&mut self, prompt: String) {
        self.sync_mcp_tools();
        self.run = Some(self.agent.prompt(prompt));
    }

    /// MCP tool-set changes reach the agent between runs (see [`crate::mcp`]).
    fn sync_mcp_tools(&mut self) {
        if let Some(notice) = self.mcp.sync(&self.agent) {
            self.say(&notice);
        }
    }

    /// Wait for the aborted run to end and report it. Messages queued for it are dropped:
    /// an abort stops everything the user asked for so far.
    async fn settle(&mut self) {
        if self.agent.has_queued_messages() {
            self.agent.clear_all_queues();
            self.say("(queued messages dropped)");
        }
        if let Some(run) = self.run.take() {
            let result = run.await;
            self.finished(result);
        }
    }

    fn finished(&mut self, result: Result<(), pi_agent::AgentError>) {
        self.run = None;
        let report = match result {
            Err(error) => Err(CliError::Run(error.to_string())),
            Ok(()) => outcome(&self.agent, &self.backend),
        };
        match report {
            Ok(()) => {}
            Err(CliError::Aborted) => self.say("(aborted)"),
            Err(error) => {
                self.say(&format!("error: {}", error.one_line()));
            }
        }
        // Steering typed too late for the run, and follow-ups, start the next run.
        if self.agent.has_queued_messages() {
            self.sync_mcp_tools();
            self.run = Some(self.agent.continue_run());
        }
    }

    async fn exit(&mut self) {
        self.agent.abort();
        if let Some(run) = self.run.take() {
            let _ = run.await;
        }
    }

    /// Run the session until `/exit`, end of input or a second Ctrl-C.
    pub async fn run(mut self, mut inputs: mpsc::UnboundedReceiver<Input>) -> Result<(), CliError> {
        self.greet();
        // The first prompt gets the MCP servers' tools (bounded; late servers join later).
        if let Some(line) = self.mcp.starting() {
            self.say(&line);
        }
        for line in self.mcp.wait_ready().await? {
            self.say(&line);
        }
        self.sync_mcp_tools();
        let mut input_open = true;
        loop {
            if !input_open && self.run.is_none() {
                return Ok(());
            }
            let running = self.run.is_some();
            let next = tokio::select! {
                biased;
                input = inputs.recv(), if input_open => match input {
                    Some(Input::Line(line)) => self.line(line),
                    Some(Input::Interrupt) => self.interrupt(),
                    Some(Input::Eof) | None => {
                        // Let a running answer finish, then leave.
                        input_open = false;
                        Next::Continue
                    }
                },
                result = async { match self.run.as_mut() { Some(run) => run.await, None => Ok(()) } }, if running => {
                    self.finished(result);
                    Next::Continue
                }
            };
            match next {
                Next::Continue => {}
                Next::Settle => self.settle().await,
                Next::Exit => {
                    self.exit().await;
                    return Ok(());
                }
            }
        }
    }
}

/// `pi chat` on the process's terminal or standard input.
pub async fn chat(backend: Backend, args: &ModelArgs, mode: OutputMode) -> Result<(), CliError> {
    let (tx, rx) = mpsc::unbounded_channel();
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let (out, _restore): (Box<dyn Write + Send>, _) = if interactive {
        let (out, restore) = spawn_editor(tx)?;
        (out, Some(restore))
    } else {
        forward_interrupts(tx.clone())?;
        spawn_line_reader(std::io::BufReader::new(std::io::stdin()), tx);
        (Box::new(std::io::stdout()), None)
    };
    let session = Session::new(backend, args, mode, out, stdout_colors())?;
    session.run(rx).await
}
