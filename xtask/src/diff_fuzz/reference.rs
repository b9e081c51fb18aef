//! The reference side of the differential test: `../shared/conformance/reference/run.mjs`
//! under Node, many scenarios per process.
//!
//! The runner is copied (with its pinned `package.json` / `package-lock.json`) into
//! `target/diff-fuzz/reference/` and installed there with `npm ci`, because the shared
//! directory is read-only. `xtask/node/diff-fuzz-reference.mjs` then loads the unmodified
//! runner once per scenario inside one long-lived process: one scenario path per stdin line,
//! one JSON answer `{code, stdout, stderr}` per stdout line.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use serde_json::Value;

/// How long one scenario may take on the reference before its process is replaced.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(60);

/// What the reference runner made of one scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefOutcome {
    /// The trace it printed (exit 0).
    Trace(String),
    /// Exit 2: the scenario is invalid (or the runner failed); the message.
    Invalid(String),
    /// No answer within [`SCENARIO_TIMEOUT`].
    TimedOut,
}

/// Copy the reference runner into `work` and install its packages unless already there.
pub fn prepare(shared_reference: &Path, work: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    for file in ["run.mjs", "package.json", "package-lock.json"] {
        let from = shared_reference.join(file);
        let to = work.join(file);
        let fresh = std::fs::read(&from).map_err(|e| format!("{}: {e}", from.display()))?;
        if std::fs::read(&to).ok().as_deref() != Some(fresh.as_slice()) {
            std::fs::write(&to, fresh).map_err(|e| format!("{}: {e}", to.display()))?;
        }
    }
    if !work.join("node_modules/@earendil-works/pi-agent-core").is_dir() {
        eprintln!("installing the reference runner's packages in {}", work.display());
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(work)
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run npm: {e}"))?;
        if !status.success() {
            return Err(format!("npm ci failed with {status}"));
        }
    }
    Ok(work.join("run.mjs"))
}

/// One long-lived Node process running scenarios through the reference runner.
pub struct Reference {
    driver: PathBuf,
    run_mjs: PathBuf,
    child: Child,
    stdin: ChildStdin,
    answers: Receiver<String>,
}

impl Reference {
    /// Start a driver process.
    pub fn start(driver: &Path, run_mjs: &Path) -> Result<Self, String> {
        let mut child = Command::new("node")
            .arg(driver)
            .arg(run_mjs)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot run node: {e}"))?;
        let stdin = child.stdin.take().ok_or("node: no stdin")?;
        let stdout = child.stdout.take().ok_or("node: no stdout")?;
        let (sender, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self { driver: driver.to_owned(), run_mjs: run_mjs.to_owned(), child, stdin, answers })
    }

    /// Run one scenario file. A hung or dead process is replaced.
    pub fn run(&mut self, scenario: &Path) -> Result<RefOutcome, String> {
        let sent = writeln!(self.stdin, "{}", scenario.display()).and_then(|()| self.stdin.flush());
        let answer = match sent {
            Ok(()) => self.answers.recv_timeout(SCENARIO_TIMEOUT),
            Err(_) => Err(RecvTimeoutError::Disconnected),
        };
        let line = match answer {
            Ok(line) => line,
            Err(error) => {
                self.restart()?;
                return match error {
                    RecvTimeoutError::Timeout => Ok(RefOutcome::TimedOut),
                    RecvTimeoutError::Disconnected => Err("the reference driver died".into()),
                };
            }
        };
        let value: Value = serde_json::from_str(&line).map_err(|e| format!("reference driver: {e}: {line}"))?;
        let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        Ok(match value.get("code").and_then(Value::as_i64) {
            Some(0) => RefOutcome::Trace(text("stdout")),
            _ => RefOutcome::Invalid(text("stderr").trim().to_owned()),
        })
    }

    fn restart(&mut self) -> Result<(), String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        *self = Self::start(&self.driver.clone(), &self.run_mjs.clone())?;
        Ok(())
    }
}

impl Drop for Reference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
