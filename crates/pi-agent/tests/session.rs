//! Session files: a conversation that survives `kill -9` mid-stream, torn and damaged files,
//! transcripts rewritten when they change, and the system-prompt rule on resume.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_agent::{Agent, AgentError, AgentOptions, Session};
use pi_providers::faux::{faux_assistant_message, faux_text, FauxProvider, FauxResponse};
use pi_types::{
    AgentMessage, AssistantMessageBuilder, AssistantMessageEventStream, Model, StopReason, StreamFn, StreamOptions,
    TranscriptContext,
};

/// The environment variable that makes [`session_child`] the process that gets killed.
const CHILD: &str = "PI_AGENT_SESSION_CHILD";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pi-agent-session-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("session.jsonl")
}

fn lines(path: &Path) -> usize {
    std::fs::read(path).map(|b| b.iter().filter(|&&c| c == b'\n').count()).unwrap_or(0)
}

fn roles(messages: &[AgentMessage]) -> Vec<&str> {
    messages.iter().map(AgentMessage::role).collect()
}

fn answering(texts: &[&str]) -> (FauxProvider, Model) {
    let faux = FauxProvider::default();
    faux.set_responses(
        texts.iter().map(|t| FauxResponse::Message(faux_assistant_message(vec![faux_text(*t)], StopReason::Stop))),
    );
    let model = faux.model();
    (faux, model)
}

/// Answers the first request, then streams a few words of the second and never ends it.
struct HangsOnSecondCall {
    calls: AtomicUsize,
}

impl StreamFn for HangsOnSecondCall {
    fn stream(
        &self,
        model: &Model,
        _context: TranscriptContext,
        _options: StreamOptions,
    ) -> AssistantMessageEventStream {
        let model = model.clone();
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        AssistantMessageEventStream::from_producer(move |tx| async move {
            let mut out = AssistantMessageBuilder::for_model(tx, &model);
            out.start().await;
            let text = out.start_text().await;
            out.text_delta(text, if call == 0 { "First answer." } else { "Half an ans" }).await.ok();
            if call > 0 {
                std::future::pending::<()>().await;
            }
            out.end_text(text).await.ok();
            out.done(StopReason::Stop).await;
        })
    }
}

/// The process `a_session_survives_kill_9_mid_stream` kills: a no-op in a normal test run.
#[test]
fn session_child() {
    let Ok(path) = std::env::var(CHILD) else { return };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (session, saved) = Session::open(&path).unwrap();
        let stream = Arc::new(HangsOnSecondCall { calls: AtomicUsize::new(0) });
        let agent = saved.resume(AgentOptions::new(stream).with_system_prompt("Be brief.")).unwrap();
        let _recording = session.attach(&agent).await.unwrap();
        agent.prompt("First question").await.unwrap();
        agent.prompt("Second question").await.unwrap();
    });
}

#[test]
fn a_session_survives_kill_9_mid_stream() {
    let path = scratch("kill9");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "session_child", "--nocapture", "--test-threads=1"])
        .env(CHILD, &path)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // System prompt, first question and answer, second question: then the second answer streams.
    let deadline = Instant::now() + Duration::from_secs(60);
    while lines(&path) < 4 {
        assert!(Instant::now() < deadline, "the child wrote {} lines", lines(&path));
        assert!(child.try_wait().unwrap().is_none(), "the child ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let (session, saved) = Session::open(&path).unwrap();
    assert!(saved.warnings.is_empty(), "{:?}", saved.warnings);
    assert_eq!(roles(&saved.messages), ["system", "user", "assistant", "user"]);
    assert_eq!(saved.messages[2].as_assistant().unwrap().text(), "First answer.");
    assert_eq!(saved.system_prompt(), "Be brief.");

    // Resumed in this process: the question the crash interrupted gets its answer.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (faux, model) = answering(&["Second answer."]);
        let agent = saved.resume(AgentOptions::new(Arc::new(faux)).with_model(model)).unwrap();
        let _recording = session.attach(&agent).await.unwrap();
        agent.continue_run().await.unwrap();
        assert_eq!(agent.messages().len(), 5);
    });
    let (_, reloaded) = Session::open(&path).unwrap();
    assert_eq!(roles(&reloaded.messages), ["system", "user", "assistant", "user", "assistant"]);
    assert_eq!(reloaded.messages[4].as_assistant().unwrap().text(), "Second answer.");
}

#[tokio::test]
async fn a_torn_last_line_is_dropped_with_a_warning_and_the_file_repaired() {
    let path = scratch("torn");
    let (faux, model) = answering(&["Hi!", "Again."]);
    let options = || AgentOptions::new(Arc::new(faux.clone())).with_model(model.clone());
    let (session, saved) = Session::open(&path).unwrap();
    let agent = saved.resume(options()).unwrap();
    let _recording = session.attach(&agent).await.unwrap();
    agent.prompt("Hello").await.unwrap();
    let whole = std::fs::read(&path).unwrap();
    let mut torn = whole.clone();
    torn.extend_from_slice(br#"{"role":"user","content":"cut of"#);
    std::fs::write(&path, &torn).unwrap();

    let (session, saved) = Session::open(&path).unwrap();
    assert_eq!(roles(&saved.messages), ["user", "assistant"]);
    assert_eq!(saved.warnings.len(), 1);
    assert!(saved.warnings[0].contains("dropped an unfinished last line (32 bytes)"), "{}", saved.warnings[0]);
    assert_eq!(std::fs::read(&path).unwrap(), whole, "cut back to the last whole line");
    let agent = saved.resume(options()).unwrap();
    let _recording = session.attach(&agent).await.unwrap();
    agent.prompt("More").await.unwrap();
    let (_, saved) = Session::open(&path).unwrap();
    assert_eq!(roles(&saved.messages), ["user", "assistant", "user", "assistant"]);
    assert!(saved.warnings.is_empty());
}

#[test]
fn a_damaged_line_is_an_error_naming_it() {
    let path = scratch("damaged");
    std::fs::write(&path, "{\"role\":\"user\",\"content\":\"Hi\",\"timestamp\":1}\nnot json\n").unwrap();
    match Session::open(&path) {
        Err(AgentError::SessionCorrupt { line, .. }) => assert_eq!(line, 2),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_file_is_rewritten_when_the_transcript_changes_otherwise() {
    let path = scratch("rewrite");
    let (faux, model) = answering(&["One.", "Two."]);
    let (session, saved) = Session::open(&path).unwrap();
    let agent = saved.resume(AgentOptions::new(Arc::new(faux)).with_model(model).with_system_prompt("Sys")).unwrap();
    let _recording = session.attach(&agent).await.unwrap();
    assert_eq!(lines(&path), 1, "the leading system message is written on attach");
    agent.prompt("First").await.unwrap();
    agent.reset().unwrap();
    agent.prompt("Second").await.unwrap();
    let (_, saved) = Session::open(&path).unwrap();
    assert_eq!(roles(&saved.messages), ["system", "user", "assistant"]);
    assert_eq!(saved.messages[2].as_assistant().unwrap().text(), "Two.");
    assert!(session.error().is_none());
}

#[tokio::test]
async fn resuming_with_another_system_prompt_is_refused() {
    let path = scratch("prompt");
    let (faux, model) = answering(&["Hi."]);
    let options = || AgentOptions::new(Arc::new(faux.clone())).with_model(model.clone());
    let (session, saved) = Session::open(&path).unwrap();
    let agent = saved.resume(options().with_system_prompt("Be brief.")).unwrap();
    let _recording = session.attach(&agent).await.unwrap();
    agent.prompt("Hello").await.unwrap();

    let (_, saved) = Session::open(&path).unwrap();
    let refused = saved.clone().resume(options().with_system_prompt("Be verbose.")).err();
    assert_eq!(
        refused,
        Some(AgentError::SystemPromptChanged { saved: "Be brief.".into(), given: "Be verbose.".into() })
    );
    assert_eq!(saved.clone().resume(options().with_system_prompt("Be brief.")).unwrap().system_prompt(), "Be brief.");
    let agent: Agent = saved.resume(options()).unwrap();
    assert_eq!(agent.system_prompt(), "Be brief.");
}
