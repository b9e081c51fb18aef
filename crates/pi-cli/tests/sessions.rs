//! `pi --session URL` with a database, end to end through the binary, and `pi sessions`:
//! SQLite always, PostgreSQL against the server at `PI_TEST_POSTGRES_URL` (`.ci/run` starts
//! one; in CI a missing server fails the test).
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output, Stdio};

/// The binary with an empty environment: no API keys, the offline demo.
fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pi")).env_clear().stdin(Stdio::null()).args(args).output().unwrap()
}

fn roles(url: &str) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (store, id) = pi_store::open(url).await.unwrap();
        let stored = store.load(&id).await.unwrap();
        stored.messages.iter().map(|m| m.role().to_owned()).collect()
    })
}

/// Two prompts into one session of `store`, resumed by the second process, then listed.
fn records_resumes_and_lists(store: &str) {
    let id = format!("cli-{}-{}", std::process::id(), pi_types::now_ms());
    let url = format!("{store}#{id}");

    let output = run(&["--session", &url, "What is 12 * (3 + 4)?"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(roles(&url), ["system", "user", "assistant", "toolResult", "assistant"]);

    let output = run(&["--session", &url, "Tell me a joke"]);
    assert!(output.status.success(), "{output:?}");
    let roles = roles(&url);
    assert_eq!(roles.len(), 7, "{roles:?}");
    assert_eq!(roles[5..], ["user", "assistant"]);

    let output = run(&["sessions", store]);
    assert!(output.status.success(), "{output:?}");
    let listing = String::from_utf8(output.stdout).unwrap();
    let line = listing.lines().find(|line| line.starts_with(&id)).unwrap_or_else(|| panic!("{listing}"));
    assert_eq!(line.split_whitespace().nth(2), Some("7"), "{listing}");
    assert!(listing.starts_with("ID"), "{listing}");
}

#[test]
fn pi_session_sqlite_records_resumes_and_lists() {
    let dir = std::env::temp_dir().join(format!("pi-cli-sqlite-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    records_resumes_and_lists(&format!("sqlite:{}", dir.join("sessions.db").display()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pi_session_postgres_records_resumes_and_lists() {
    let url = match std::env::var("PI_TEST_POSTGRES_URL") {
        Ok(url) => url,
        Err(_) if std::env::var("CI").is_ok_and(|ci| ci == "true") => {
            panic!("PI_TEST_POSTGRES_URL is not set: CI must start PostgreSQL (.ci/run)")
        }
        Err(_) => return eprintln!("skipped: PI_TEST_POSTGRES_URL is not set (a PostgreSQL server; see .ci/run)"),
    };
    records_resumes_and_lists(&url);
}

#[test]
fn a_database_that_cannot_be_reached_is_a_clear_error_without_the_password() {
    // A closed loopback port: the connection is refused at once.
    let output = run(&["--session", "postgres://pi:hunter2@127.0.0.1:1/pi#x", "Hi"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("session store postgres://pi@127.0.0.1:1/pi"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}
