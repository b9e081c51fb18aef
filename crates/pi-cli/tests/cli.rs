//! The CLI on the built-in faux provider.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

#[tokio::test]
async fn faux_run_streams_the_answer_and_reports_the_tool() {
    let options = pi_cli::CliOptions::parse(["--provider", "faux", "one two three"].map(String::from)).unwrap();
    let (out, log) = (Buffer::default(), Buffer::default());
    pi_cli::run(options, out.clone(), log.clone()).await.unwrap();
    assert!(out.text().contains("Your prompt has 3 words."), "{}", out.text());
    assert_eq!(log.text(), "[tool] word_count {\"text\":\"one two three\"}\n[tool] word_count done: 3\n");
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    assert!(pi_cli::CliOptions::parse(Vec::<String>::new()).is_err());
    assert!(pi_cli::CliOptions::parse(["--thinking", "huge", "x"].map(String::from)).is_err());
    assert!(pi_cli::CliOptions::parse(["--model"].map(String::from)).is_err());
    let unknown = pi_cli::CliOptions::parse(["--provider", "nope", "x"].map(String::from)).unwrap();
    let error = pi_cli::resolve_model(&unknown).err().unwrap();
    assert_eq!(error.to_string(), "unknown provider `nope`");
}
