//! `pi chat` on a pseudo-terminal, where the line editor (rustyline) reads the keys: input
//! that arrives in one burst (a paste without bracketed paste, `tmux send-keys`, an IME) is
//! read at once, not left waiting for another key. rustyline 17 with an external printer
//! waited; this test hung on it.
#![cfg(unix)]
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::pty::{openpty, Winsize};

/// Longest wait for expected output before the test calls it a hang.
const HANG: Duration = Duration::from_secs(60);

/// A `pi chat` child on a pty, and what it has written so far.
struct Terminal {
    child: std::process::Child,
    master: File,
    output: mpsc::Receiver<Vec<u8>>,
    seen: String,
}

impl Terminal {
    fn start() -> Self {
        let size = Winsize { ws_row: 24, ws_col: 100, ws_xpixel: 0, ws_ypixel: 0 };
        let pty = openpty(&size, None).unwrap();
        let slave = File::from(pty.slave);
        let child = Command::new(env!("CARGO_BIN_EXE_pi"))
            .arg("chat")
            .env_clear()
            .env("TERM", "xterm")
            .env("NO_COLOR", "1")
            .env("PI_HISTORY", "")
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .spawn()
            .unwrap();
        let master = File::from(pty.master);
        let mut reader = master.try_clone().unwrap();
        let (tx, output) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            // Ends with EIO once the child has closed the slave side.
            while let Ok(n @ 1..) = reader.read(&mut buffer) {
                if tx.send(buffer[..n].to_vec()).is_err() {
                    return;
                }
            }
        });
        Self { child, master, output, seen: String::new() }
    }

    /// Read until `needle` has been written; answers the editor's cursor-position queries.
    fn wait_for(&mut self, needle: &str) {
        let deadline = Instant::now() + HANG;
        while !self.seen.contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(bytes) => {
                    let text = String::from_utf8_lossy(&bytes);
                    for _ in 0..text.matches("\u{1b}[6n").count() {
                        self.master.write_all(b"\x1b[1;1R").unwrap();
                    }
                    self.seen.push_str(&text);
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("no {needle:?} within {HANG:?}; the terminal shows:\n{}", self.seen);
                }
            }
        }
    }

    /// Type `keys` as one write: one burst of input.
    fn burst(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_burst_of_lines_is_read_without_another_key() {
    let mut terminal = Terminal::start();
    terminal.wait_for("/help for commands, Ctrl-D to leave");
    // Two lines pasted at once: a prompt, and a follow-up queued while it runs.
    terminal.burst("What is 2+2?\r/followup And 3*3?\r");
    terminal.wait_for("← calculate: 2+2 = 4");
    terminal.wait_for("← calculate: 3*3 = 9");
    terminal.wait_for("[stop · ");
    // Ctrl-D on the empty line ends the session.
    terminal.burst("\x04");
    let deadline = Instant::now() + HANG;
    let status = loop {
        if let Some(status) = terminal.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "pi chat did not exit after Ctrl-D:\n{}", terminal.seen);
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}:\n{}", terminal.seen);
    assert!(terminal.seen.contains("(follow-up queued)"), "{}", terminal.seen);
}
