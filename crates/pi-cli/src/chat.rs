//! `pi chat`: an interactive session.
//!
//! One thread owns standard input and turns it into [`Input`]s: on a terminal a rustyline
//! editor (line editing, history, Ctrl-C as an input), otherwise plain lines (so the session
//! can be scripted through a pipe; Ctrl-C arrives as SIGINT). The session loop handles
//! inputs while a run streams: a line typed meanwhile is sent as a steering message,
//! `/followup TEXT` queues a follow-up, `/abort` or Ctrl-C aborts the run and a second
//! Ctrl-C exits. On a terminal, output goes through rustyline's external printer (line by
//! line, above the prompt) so typing and streaming do not garble each other.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pi_agent::{Agent, RunHandle};
use pi_types::UserMessage;
use tokio::sync::mpsc;

use crate::args::{ModelArgs, OutputMode};
use crate::error::CliError;
use crate::render::{stdout_colors, Renderer};
use crate::run::{attach, build_agent, lock, outcome, SharedRenderer, DEMO_NOTICE};
use crate::setup::Backend;

/// What the user did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A line of text.
    Line(String),
    /// Ctrl-C.
    Interrupt,
    /// End of input (Ctrl-D, closed pipe).
    Eof,
}

const HELP: &str = "\
commands:
  TEXT            prompt the agent (while it works: steer it; read after the current turn)
  /followup TEXT  queue TEXT for when the agent would stop
  /abort          abort the run (Ctrl-C too; a second Ctrl-C exits)
  /reset          clear the conversation
  /model [ID]     show the model, or switch (ID, provider/ID or provider)
  /tools          list the tools
  /help           this list
  /exit           leave (Ctrl-D too)";

const PROMPT: &str = "› ";

/// Writes whole lines through rustyline's external printer (it owns the terminal while
/// the prompt is shown); a partial line waits for its newline. Once the editor has stopped
/// reading (end of input) lines go straight to stdout.
struct PrinterWriter {
    printer: Box<dyn rustyline::ExternalPrinter + Send>,
    editor_done: Arc<AtomicBool>,
    pending: Vec<u8>,
}

impl Write for PrinterWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            if self.editor_done.load(Ordering::Acquire) {
                let mut stdout = std::io::stdout();
                stdout.write_all(&line)?;
                stdout.flush()?;
            } else {
                let text = String::from_utf8_lossy(&line).into_owned();
                self.printer.print(text).map_err(std::io::Error::other)?;
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The terminal settings from before the line editor switched to raw mode, put back when
/// the session ends: the session may end (second Ctrl-C, `/exit`) while the editor's thread
/// is still inside `readline`, and the process exits without it restoring them.
struct TerminalRestore {
    #[cfg(unix)]
    saved: Option<nix::sys::termios::Termios>,
    editor_done: Arc<AtomicBool>,
}

impl TerminalRestore {
    fn save(editor_done: Arc<AtomicBool>) -> Self {
        Self {
            #[cfg(unix)]
            saved: nix::sys::termios::tcgetattr(std::io::stdin()).ok(),
            editor_done,
        }
    }
}

impl Drop for TerminalRestore {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(saved) = &self.saved {
            let _ = nix::sys::termios::tcsetattr(std::io::stdin(), nix::sys::termios::SetArg::TCSADRAIN, saved);
        }
        if !self.editor_done.load(Ordering::Acquire) {
            // Leave the line the prompt was drawn on.
            println!();
        }
    }
}

/// Where the prompt history of terminal sessions is kept: `$PI_HISTORY`, else
/// `~/.pi_history`; `PI_HISTORY=` (empty) keeps none.
fn history_file() -> Option<std::path::PathBuf> {
    match std::env::var_os("PI_HISTORY") {
        Some(path) if path.is_empty() => None,
        Some(path) => Some(path.into()),
        None => std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".pi_history")),
    }
}

/// Start the thread reading the terminal with rustyline; returns the output writer and the
/// guard that restores the terminal.
fn spawn_editor(tx: mpsc::UnboundedSender<Input>) -> Result<(Box<dyn Write + Send>, TerminalRestore), CliError> {
    let editor_done = Arc::new(AtomicBool::new(false));
    let restore = TerminalRestore::save(Arc::clone(&editor_done));
    let mut editor =
        rustyline::DefaultEditor::new().map_err(|e| CliError::Io(format!("cannot open the terminal: {e}")))?;
    let printer =
        editor.create_external_printer().map_err(|e| CliError::Io(format!("cannot print to the terminal: {e}")))?;
    let history = history_file();
    if let Some(path) = &history {
        // A missing or unreadable history file only means an empty history.
        let _ = editor.load_history(path);
    }
    let done = Arc::clone(&editor_done);
    std::thread::spawn(move || loop {
        match editor.readline(PROMPT) {
            Ok(line) => {
                if !line.trim().is_empty() && editor.add_history_entry(line.as_str()).unwrap_or(false) {
                    if let Some(path) = &history {
                        let _ = editor.append_history(path);
                    }
                }
                if tx.send(Input::Line(line)).is_err() {
                    return;
                }
            }
            Err(rustyline::error::ReadlineError::Interrupted) => {
                if tx.send(Input::Interrupt).is_err() {
                    return;
                }
            }
            Err(_) => {
                done.store(true, Ordering::Release);
                let _ = tx.send(Input::Eof);
                return;
            }
        }
    });
    let writer = PrinterWriter { printer: Box::new(printer), editor_done, pending: Vec::new() };
    Ok((Box::new(writer), restore))
}

/// Start the thread reading plain lines from `input` (a pipe or file).
pub fn spawn_line_reader(input: impl BufRead + Send + 'static, tx: mpsc::UnboundedSender<Input>) {
    std::thread::spawn(move || {
        let mut input = input;
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            match input.read_until(b'\n', &mut buffer) {
                Ok(0) | Err(_) => {
                    let _ = tx.send(Input::Eof);
                    return;
                }
                Ok(_) => {
                    // Non-UTF-8 input is read lossily rather than refused.
                    let line = String::from_utf8_lossy(&buffer);
                    let line = line.trim_end_matches(['\n', '\r']).to_owned();
                    if tx.send(Input::Line(line)).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

/// A chat session over an agent.
pub struct Session {
    agent: Agent,
    backend: Backend,
    renderer: SharedRenderer,
    run: Option<RunHandle>,
    interrupted: bool,
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
        attach(&agent, &renderer).detach();
        Ok(Self { agent, backend, renderer, run: None, interrupted: false })
    }

    fn say(&self, text: &str) {
        lock(&self.renderer).notice(text);
    }

    fn model_name(&self) -> String {
        let model = self.agent.model();
        format!("{}/{}", model.provider, model.id)
    }

    fn greet(&self) {
        if self.backend.is_demo() {
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
            "/reset" => match self.agent.reset() {
                Ok(()) => self.say("(conversation cleared)"),
                Err(_) => self.say("(busy: /abort first, then /reset)"),
            },
            "/model" if rest.is_empty() => self.say(&format!("model: {}", self.model_name())),
            "/model" => match self.backend.switch(rest) {
                Ok(model) => {
                    self.agent.set_model(model);
                    self.say(&format!("(model: {})", self.model_name()));
                }
                Err(error) => self.say(&format!("error: {}", error.one_line())),
            },
            "/tools" => {
                let tools = self.agent.tools();
                let lines: Vec<String> = tools
                    .iter()
                    .map(|t| format!("  {}: {}", t.spec().name(), t.spec().declaration.description))
                    .collect();
                self.say(&format!("tools:\n{}", lines.join("\n")));
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

    fn start(&mut self, prompt: String) {
        self.run = Some(self.agent.prompt(prompt));
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
            Ok(()) => outcome(&self.agent, &self.backend.model),
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

/// Turn SIGINT into [`Input::Interrupt`]s (when no line editor reads Ctrl-C as a key). One
/// listener for the whole session, so no signal falls between two waits.
fn forward_interrupts(tx: mpsc::UnboundedSender<Input>) -> Result<(), CliError> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut interrupts =
            signal(SignalKind::interrupt()).map_err(|e| CliError::Io(format!("cannot listen for Ctrl-C: {e}")))?;
        tokio::spawn(async move {
            while interrupts.recv().await.is_some() {
                if tx.send(Input::Interrupt).is_err() {
                    return;
                }
            }
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            if tx.send(Input::Interrupt).is_err() {
                return;
            }
        }
    });
    Ok(())
}
