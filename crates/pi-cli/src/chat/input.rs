//! Where a chat session's input comes from and where its output goes.
//!
//! On a terminal a rustyline editor runs on its own thread (line editing, history, Ctrl-C
//! read as a key) and output goes through its external printer, line by line above the
//! prompt, so typing and streaming do not garble each other. Otherwise stdin is read as
//! plain lines (so a session can be scripted through a pipe) and SIGINT becomes
//! [`Input::Interrupt`].

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::error::CliError;

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
pub struct TerminalRestore {
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
pub fn spawn_editor(tx: mpsc::UnboundedSender<Input>) -> Result<(Box<dyn Write + Send>, TerminalRestore), CliError> {
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

/// Turn SIGINT into [`Input::Interrupt`]s (when no line editor reads Ctrl-C as a key). One
/// listener for the whole session, so no signal falls between two waits.
pub fn forward_interrupts(tx: mpsc::UnboundedSender<Input>) -> Result<(), CliError> {
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
