//! A live tool set end to end: an in-process MCP server adds and removes a tool between the
//! prompts of one conversation, and the agent's events, transcript and provider requests are
//! exactly those of the same conversation driven by `set_tools` with plain function tools.
#![allow(clippy::unwrap_used)]

mod test_server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pi_agent::{Agent, AgentOptions};
use pi_mcp::McpHub;
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxOptions, FauxProvider, FauxResponse};
use pi_testkit::normalize::normalize;
use pi_types::{AgentEvent, AgentTool, AgentToolResult, FnTool, StopReason, Tool, ToolSpec};
use serde_json::{json, Map, Value};
use test_server::{declaration, TestServer};

const WAIT: Duration = Duration::from_secs(10);

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Three prompts: call echo; (add appears) call add; (echo disappears) answer.
fn script() -> Vec<FauxResponse> {
    let call = |id: &str, name: &str, arguments: Value| {
        FauxResponse::Message(faux_assistant_message(
            vec![faux_tool_call(id, name, args(arguments))],
            StopReason::ToolUse,
        ))
    };
    let say = |text: &str| FauxResponse::Message(faux_assistant_message(vec![faux_text(text)], StopReason::Stop));
    vec![
        call("c1", "echo", json!({"text": "hi"})),
        say("Echoed."),
        call("c2", "add", json!({"a": 1, "b": 2})),
        say("Added."),
        say("Bye."),
    ]
}

/// What a run leaves behind, normalized (timestamps zeroed): events, transcript, requests.
#[derive(Debug, PartialEq)]
struct Record {
    events: Vec<Value>,
    transcript: Vec<Value>,
    requests: Vec<Value>,
    /// Runs in the event stream, each checked against the event grammar.
    runs: usize,
}

struct Harness {
    agent: Agent,
    faux: FauxProvider,
    events: Arc<Mutex<Vec<AgentEvent>>>,
}

impl Harness {
    fn new() -> Self {
        let faux =
            FauxProvider::new(FauxOptions { record_requests: true, ..FauxOptions::default() }.with_token_size(2));
        faux.set_responses(script());
        let options =
            AgentOptions::new(Arc::new(faux.clone())).with_model(faux.model()).with_system_prompt("Be brief.");
        let agent = Agent::new(options);
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let subscription = agent.subscribe_fn(move |event| sink.lock().unwrap().push(event.clone()));
        std::mem::forget(subscription);
        Self { agent, faux, events }
    }

    async fn prompt(&self, text: &str) {
        tokio::time::timeout(WAIT, self.agent.prompt(text)).await.expect("the run ended").expect("the run succeeded");
    }

    fn record(&self) -> Record {
        let json = |v: Value| normalize(v);
        let events = self.events.lock().unwrap();
        let runs = pi_testkit::grammar::check_runs(&events).expect("well-formed runs");
        let events = events.iter().map(|e| json(serde_json::to_value(e).unwrap())).collect();
        let transcript = self.agent.messages().iter().map(|m| json(serde_json::to_value(m).unwrap())).collect();
        let requests = self.faux.requests().iter().map(|r| json(serde_json::to_value(r.messages()).unwrap())).collect();
        Record { events, transcript, requests, runs }
    }
}

/// The server's tools as plain function tools with the same declarations and results.
fn fn_tool(name: &str) -> Arc<dyn AgentTool> {
    let mcp = declaration(name);
    let declaration = Tool {
        name: mcp.name.to_string(),
        description: mcp.description.as_deref().unwrap_or("").to_owned(),
        parameters: Arc::new(Value::Object((*mcp.input_schema).clone())),
        constrained_sampling: None,
    };
    let name = name.to_owned();
    let tool = FnTool::new(ToolSpec::new(declaration).unwrap(), move |args: Value, _ctx| {
        let text = match name.as_str() {
            "echo" => format!("echo: {}", args["text"].as_str().unwrap_or("")),
            _ => format!("{}", args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0)),
        };
        async move { Ok(AgentToolResult::text(text).with_details(json!({"server": "test"}))) }
    });
    Arc::new(tool)
}

async fn run_with_set_tools() -> Record {
    let harness = Harness::new();
    harness.agent.set_tools([fn_tool("echo")]);
    harness.prompt("Echo hi.").await;
    harness.agent.set_tools([fn_tool("echo"), fn_tool("add")]);
    harness.prompt("Add 1 and 2.").await;
    harness.agent.set_tools([fn_tool("add")]);
    harness.prompt("Thanks.").await;
    harness.record()
}

async fn run_with_mcp() -> Record {
    let server = TestServer::new(&["echo"]);
    let hub = McpHub::new();
    hub.add_server(server.config("test"));
    assert!(hub.wait_ready(WAIT).await);
    let harness = Harness::new();
    let mut seen = 0;
    let mut changes = hub.tools_changed();

    // The application's whole part: hand a changed set to the agent before each prompt.
    let sync = |seen: &mut u64| {
        if let Some(tools) = hub.tools_if_changed(seen) {
            harness.agent.set_tools(tools);
        }
    };
    sync(&mut seen);
    harness.prompt("Echo hi.").await;

    changes.borrow_and_update();
    server.set_tools(&["echo", "add"]).await;
    tokio::time::timeout(WAIT, changes.changed()).await.expect("add listed").unwrap();
    sync(&mut seen);
    harness.prompt("Add 1 and 2.").await;

    server.set_tools(&["add"]).await;
    tokio::time::timeout(WAIT, changes.changed()).await.expect("echo unlisted").unwrap();
    sync(&mut seen);
    harness.prompt("Thanks.").await;
    harness.record()
}

#[tokio::test]
async fn an_mcp_tool_set_change_is_a_set_tools() {
    let expected = run_with_set_tools().await;
    let actual = run_with_mcp().await;
    assert_eq!(actual.requests, expected.requests);
    assert_eq!(actual.transcript, expected.transcript);
    assert_eq!(actual.events, expected.events);

    // And the shape itself: each change reaches the next request as a system message.
    let system = |request: &Value| -> Vec<Value> {
        let messages = request.as_array().unwrap();
        messages.iter().filter(|m| m["role"] == "system").cloned().collect()
    };
    assert_eq!(actual.requests.len(), 5);
    let names = |tools: &Value| -> Vec<String> {
        tools.as_array().map(|t| t.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()).unwrap_or_default()
    };
    // The system prompt, then one message per change.
    let first = system(&actual.requests[0]);
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(first[0]["content"], "Be brief.");
    assert_eq!(names(&first[1]["toolsAdded"]), ["echo"]);
    assert_eq!(system(&actual.requests[1]), first);
    let third = system(&actual.requests[2]);
    assert_eq!(third.len(), 3, "{third:?}");
    assert_eq!(names(&third[2]["toolsAdded"]), ["add"]);
    assert_eq!(third[2]["toolsRemoved"], Value::Null);
    let fifth = system(&actual.requests[4]);
    assert_eq!(fifth.len(), 4, "{fifth:?}");
    assert_eq!(names(&fifth[3]["toolsRemoved"]), ["echo"]);
    assert_eq!(fifth[3]["toolsAdded"], Value::Null);
    // The MCP results are what the server said.
    let results: Vec<&Value> = actual.transcript.iter().filter(|m| m["role"] == "toolResult").collect();
    assert_eq!(results[0]["content"], json!([{"type": "text", "text": "echo: hi"}]));
    assert_eq!(results[1]["content"], json!([{"type": "text", "text": "3"}]));
    assert_eq!(actual.runs, 3);
}
