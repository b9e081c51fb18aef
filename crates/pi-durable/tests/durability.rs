//! Durable runs on a real Restate server: a 10-step tool-using agent whose worker is killed
//! at a random step, 20 times.
//!
//! This binary is its own harness: started with `PI_DURABLE_ROLE=worker` it is the worker (a
//! separate process, so that a kill is a real `SIGKILL`); otherwise it starts a Restate server
//! on loopback ports (`PI_TEST_RESTATE_BIN`, the `restate-server` binary of the npm package
//! `@restatedev/restate-server`), registers a worker and drives the runs. Without the server it
//! skips, except in CI (`CI=true`), where it fails.
//!
//! `cargo test -p pi-rs-durable --test durability -- --measure` measures what durability adds
//! to each step instead (docs/scale-out.md).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_durable::{Client, DurableAgent};
use pi_loop::LoopConfig;
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxProvider, FauxResponse};
use pi_types::{
    AgentMessage, AgentTool, AgentToolResult, AssistantMessageEventStream, FnTool, JsonObject, Model, StopReason,
    StreamFn, StreamOptions, Tool, ToolSpec, TranscriptContext, UserMessage,
};
use serde_json::Value;

/// Tool calls per run (each one response asking for it), then one closing response.
const STEPS: usize = 10;
const KILLED_RUNS: usize = 20;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() {
    let outcome = match std::env::var("PI_DURABLE_ROLE").as_deref() {
        Ok("worker") => worker(),
        _ => driver(std::env::args().any(|a| a == "--measure")),
    };
    if let Err(error) = outcome {
        eprintln!("durability: {error}");
        std::process::exit(1);
    }
}

// ---- the worker ----

/// The scripted model: answer a transcript with `n` tool results with a call of `count`
/// (`n < STEPS`) or the closing text. It decides from the request alone, as a model does, so
/// a worker that resumes a run needs no script position.
fn model_step(model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
    let done = context.messages().iter().filter(|m| matches!(m, pi_types::Message::ToolResult(_))).count();
    let message = if done < STEPS {
        let mut args = JsonObject::new();
        args.insert("n".into(), Value::from(done));
        faux_assistant_message(
            vec![faux_text(format!("Step {done}.")), faux_tool_call(format!("call_{done}"), "count", args)],
            StopReason::ToolUse,
        )
    } else {
        faux_assistant_message(vec![faux_text("All steps done.")], StopReason::Stop)
    };
    let faux = FauxProvider::default();
    faux.set_responses([FauxResponse::Message(message)]);
    faux.stream(model, context, options)
}

/// `count`: appends its call id to the file `counter` (one line per execution, which a kill
/// cannot take back), then takes a few milliseconds, as real tools do.
fn counter_tool(counter: PathBuf) -> Result<Arc<dyn AgentTool>, Error> {
    let parameters = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let spec = ToolSpec::new(Tool::new("count", "Count one step", parameters))?;
    Ok(Arc::new(FnTool::new(spec, move |args: Value, ctx| {
        let counter = counter.clone();
        async move {
            let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&counter)?;
            file.write_all(format!("{}\n", ctx.call_id).as_bytes())?;
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(AgentToolResult::text(format!("counted {}", args["n"])))
        }
    })))
}

fn worker() -> Result<(), Error> {
    let port: u16 = std::env::var("PI_DURABLE_PORT")?.parse()?;
    let counter = PathBuf::from(std::env::var("PI_DURABLE_COUNTER")?);
    let completed = PathBuf::from(std::env::var("PI_DURABLE_COMPLETED")?);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    runtime.block_on(async move {
        let model = FauxProvider::default().model();
        let stream_fn: Arc<dyn StreamFn> = Arc::new(model_step);
        let agent = DurableAgent::new(LoopConfig::new(model, stream_fn), vec![counter_tool(counter)?]).subscribe(
            move |session, event| {
                // A call's end comes after the journal holds its result: from here it is complete.
                if let pi_types::AgentEvent::ToolExecutionEnd { tool_call_id, .. } = event {
                    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(&completed) {
                        let _ = file.write_all(format!("{session} {tool_call_id}\n").as_bytes());
                    }
                }
            },
        );
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        pi_durable::serve(agent, listener, std::future::pending::<()>()).await;
        Ok(())
    })
}

// ---- the driver ----

/// A process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

struct Restate {
    _process: Process,
    ingress: String,
    admin: String,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> Result<TempDir, Error> {
    let dir = std::env::temp_dir().join(format!("pi-durable-{name}-{}-{}", std::process::id(), fastrand::u64(..)));
    std::fs::create_dir_all(&dir)?;
    Ok(TempDir(dir))
}

/// Start a throwaway Restate server on free loopback ports and wait for it to be ready.
async fn start_restate(bin: &Path) -> Result<Restate, Error> {
    let dir = temp_dir("restate")?;
    let (ingress, admin, fabric, pgsql) = (free_port()?, free_port()?, free_port()?, free_port()?);
    let log = std::fs::File::create(dir.0.join("restate.log"))?;
    let child = Command::new(bin)
        .args(["--no-logo", "--listen-mode", "tcp", "--default-num-partitions", "1", "--base-dir"])
        .arg(&dir.0)
        .env("RESTATE_INGRESS__BIND_ADDRESS", format!("127.0.0.1:{ingress}"))
        .env("RESTATE_ADMIN__BIND_ADDRESS", format!("127.0.0.1:{admin}"))
        .env("RESTATE_BIND_ADDRESS", format!("127.0.0.1:{fabric}"))
        .env("RESTATE_ADVERTISED_ADDRESS", format!("http://127.0.0.1:{fabric}"))
        .env("RESTATE_ADMIN__QUERY_ENGINE__PGSQL_BIND_ADDRESS", format!("127.0.0.1:{pgsql}"))
        // A dead worker's run is retried soon: the test kills workers on purpose.
        .env("RESTATE_DEFAULT_RETRY_POLICY__INITIAL_INTERVAL", "20ms")
        .env("RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL", "200ms")
        .env("RESTATE_ROCKSDB_TOTAL_MEMORY_SIZE", "256MiB")
        .env("RESTATE_LOG_FORMAT", "compact")
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let process = Process(child);
    let (ingress, admin) = (format!("http://127.0.0.1:{ingress}"), format!("http://127.0.0.1:{admin}"));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let admin_up = http.get(format!("{admin}/health")).send().await.is_ok_and(|r| r.status().is_success());
        let ingress_up =
            http.get(format!("{ingress}/restate/health")).send().await.is_ok_and(|r| r.status().is_success());
        if admin_up && ingress_up {
            break;
        }
        if Instant::now() > deadline {
            return Err("Restate server not ready within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Restate { _process: process, ingress, admin, _dir: dir })
}

struct Worker {
    port: u16,
    counter: PathBuf,
    completed: PathBuf,
}

impl Worker {
    fn spawn(&self) -> Result<Process, Error> {
        let child = Command::new(std::env::current_exe()?)
            .env("PI_DURABLE_ROLE", "worker")
            .env("PI_DURABLE_PORT", self.port.to_string())
            .env("PI_DURABLE_COUNTER", &self.counter)
            .env("PI_DURABLE_COMPLETED", &self.completed)
            .stdin(Stdio::null())
            .spawn()?;
        Ok(Process(child))
    }

    /// Wait until the worker accepts connections.
    async fn ready(&self) -> Result<(), Error> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.is_err() {
            if Instant::now() > deadline {
                return Err("worker not listening within 20 s".into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_owned).collect()
}

fn prompt() -> Vec<AgentMessage> {
    vec![UserMessage { timestamp: 1, ..UserMessage::text("Count ten steps.") }.into()]
}

/// The transcript as JSON with every time it records replaced by 0: two runs made at
/// different times differ only there.
fn timeless(messages: &[AgentMessage]) -> Value {
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, field) in map.iter_mut() {
                    if key == "timestamp" || key == "durationMs" {
                        *field = Value::from(0);
                    } else {
                        strip(field);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(messages).unwrap_or(Value::Null);
    strip(&mut value);
    value
}

fn driver(measure: bool) -> Result<(), Error> {
    let bin = match std::env::var_os("PI_TEST_RESTATE_BIN") {
        Some(bin) => PathBuf::from(bin),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            return Err("PI_TEST_RESTATE_BIN is not set: CI must provide the Restate server (.ci/run)".into())
        }
        None => {
            eprintln!("durability: skipped, set PI_TEST_RESTATE_BIN to a restate-server binary (see .ci/run)");
            return Ok(());
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let restate = start_restate(&bin).await?;
        let files = temp_dir("worker")?;
        let worker = Worker {
            port: free_port()?,
            counter: files.0.join("counter"),
            completed: files.0.join("completed"),
        };
        let mut process = worker.spawn()?;
        worker.ready().await?;
        let client = Client::new(&restate.ingress, &restate.admin)?.with_run_timeout(Duration::from_secs(120));
        client.register(&format!("http://127.0.0.1:{}", worker.port)).await?;
        if measure {
            return measure_steps(&client).await;
        }

        let baseline = client.run("baseline", prompt()).await?;
        check_baseline(&baseline)?;
        let expected = timeless(&baseline);
        if lines(&worker.counter).len() != STEPS {
            return Err(format!("the uninterrupted run executed {} tools", lines(&worker.counter).len()).into());
        }

        for run in 0..KILLED_RUNS {
            let session = format!("killed-{run}");
            let before = lines(&worker.counter).len();
            let kill_at = fastrand::usize(1..=STEPS);
            let handle = client.start(&session, prompt(), None).await?;
            // Kill once the run's `kill_at`-th tool execution has begun, a little later.
            let deadline = Instant::now() + Duration::from_secs(60);
            while lines(&worker.counter).len() < before + kill_at {
                if Instant::now() > deadline {
                    return Err(format!("{session}: tool {kill_at} never ran").into());
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(Duration::from_millis(fastrand::u64(0..8))).await;
            drop(process); // SIGKILL, and reaped
            let killed_at_ms = pi_types::now_ms();
            let completed_before: BTreeSet<String> = lines(&worker.completed)
                .iter()
                .filter_map(|l| l.strip_prefix(&format!("{session} ")).map(str::to_owned))
                .collect();
            process = worker.spawn()?;
            let added = client.attach(&handle).await?;

            // Every run completes, with the transcript of the uninterrupted run.
            if timeless(&added) != expected {
                return Err(format!("{session} (killed at step {kill_at}): transcript differs from the uninterrupted run's:\n{}\n---\n{}",
                    serde_json::to_string(&timeless(&added))?, serde_json::to_string(&expected)?).into());
            }
            let stored = client.messages(&session).await?;
            if stored != added {
                return Err(format!("{session}: the session's transcript is not the run's").into());
            }
            // What ended before the kill keeps the time it was made, not the replay's.
            for message in &added {
                if let AgentMessage::ToolResult(result) = message {
                    if completed_before.contains(result.tool_call_id.as_str()) && result.timestamp > killed_at_ms {
                        return Err(format!("{session}: {} was stamped again on replay", result.tool_call_id).into());
                    }
                }
            }
            // No completed tool ran twice; only the call in flight at the kill may have.
            let mut executions: BTreeMap<String, usize> = BTreeMap::new();
            for call in &lines(&worker.counter)[before..] {
                *executions.entry(call.clone()).or_default() += 1;
            }
            for (call, count) in &executions {
                let in_flight = call == &format!("call_{}", kill_at - 1);
                if *count > 1 && (completed_before.contains(call) || !in_flight || *count > 2) {
                    return Err(format!("{session}: {call} ran {count} times (completed before the kill: {})",
                        completed_before.contains(call)).into());
                }
            }
            if executions.len() != STEPS {
                return Err(format!("{session}: {} distinct tool calls ran", executions.len()).into());
            }
            let repeated = executions.values().filter(|c| **c > 1).count();
            eprintln!("durability: {session} killed after tool {kill_at} began: completed, {repeated} in-flight call repeated");
        }
        steer_and_abort(&client, &worker).await?;
        drop(process);
        Ok(())
    })
}

/// Wait until `count` tools ran in all (the counter file's lines).
async fn tools_ran(worker: &Worker, count: usize) -> Result<(), Error> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while lines(&worker.counter).len() < count {
        if Instant::now() > deadline {
            return Err(format!("tool {count} never ran").into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

/// A steering message reaches the running agent; an abort cancels the run, which adds nothing.
async fn steer_and_abort(client: &Client, worker: &Worker) -> Result<(), Error> {
    let before = lines(&worker.counter).len();
    let handle = client.start("steered", prompt(), None).await?;
    tools_ran(worker, before + 3).await?;
    let steering: AgentMessage = UserMessage { timestamp: 2, ..UserMessage::text("Also say hi.") }.into();
    client.steer("steered", vec![steering.clone()]).await?;
    let added = client.attach(&handle).await?;
    let at = added.iter().position(|m| *m == steering).ok_or("the steering message is not in the transcript")?;
    if added.iter().filter(|m| **m == steering).count() != 1 || added[at - 1].role() != "toolResult" {
        return Err(format!("steering message at {at} of {}", added.len()).into());
    }
    if added.last().map(|m| m.role()) != Some("assistant") || added.len() != 2 * STEPS + 4 {
        return Err(format!("steered run: {} messages", added.len()).into());
    }

    let before = lines(&worker.counter).len();
    let handle = client.start("aborted", prompt(), None).await?;
    tools_ran(worker, before + 2).await?;
    client.abort(&handle).await?;
    match client.attach(&handle).await {
        Err(pi_durable::DurableError::Status { .. }) => {}
        other => return Err(format!("an aborted run answered {other:?}").into()),
    }
    let ran = lines(&worker.counter).len() - before;
    if ran >= STEPS || !client.messages("aborted").await?.is_empty() {
        return Err(format!("the aborted run went on ({ran} tools) or added messages").into());
    }
    // The session is free again: its next run completes.
    check_baseline(&client.run("aborted", prompt()).await?)?;
    eprintln!("durability: steering reached the run; the aborted run stopped after {ran} tools and added nothing");
    Ok(())
}

/// The uninterrupted run: 10 calls of `count`, in order, then the closing text.
fn check_baseline(messages: &[AgentMessage]) -> Result<(), Error> {
    let roles: Vec<&str> = messages.iter().map(|m| m.role()).collect();
    // The tool declaration (`toolsAdded`) first, then the prompt.
    let mut expected = vec!["system", "user"];
    for _ in 0..STEPS {
        expected.extend(["assistant", "toolResult"]);
    }
    expected.push("assistant");
    if roles != expected {
        return Err(format!("uninterrupted run: roles {roles:?}").into());
    }
    Ok(())
}

/// The time durability adds to a step: the same 21-step run (11 responses, 10 tool calls)
/// through Restate and in-process with the plain loop, each repeated; the difference per step.
async fn measure_steps(client: &Client) -> Result<(), Error> {
    const RUNS: usize = 10;
    const STEPS_PER_RUN: usize = 2 * STEPS + 1;
    let files = temp_dir("measure")?;
    let model = FauxProvider::default().model();
    let tools = vec![counter_tool(files.0.join("counter"))?];
    let mut plain = Vec::new();
    for _ in 0..RUNS {
        let config = LoopConfig::new(model.clone(), Arc::new(model_step) as Arc<dyn StreamFn>);
        let context = pi_loop::AgentContext { messages: Vec::new().into(), tools: tools.clone() };
        let start = Instant::now();
        pi_loop::run_agent_loop(prompt(), context, config, Arc::new(pi_loop::NullSink), Default::default()).await?;
        plain.push(start.elapsed());
    }
    let mut durable = Vec::new();
    for run in 0..RUNS {
        let start = Instant::now();
        client.run(&format!("measure-{run}"), prompt()).await?;
        durable.push(start.elapsed());
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (plain, durable) = (median(plain), median(durable));
    let added = durable.saturating_sub(plain) / STEPS_PER_RUN as u32;
    println!("run of {STEPS_PER_RUN} steps, median of {RUNS}: plain loop {plain:?}, durable {durable:?}, added per step {added:?}");
    Ok(())
}
