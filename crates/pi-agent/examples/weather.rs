//! The weather-tool walkthrough: an agent with one typed tool, a subscriber that prints the
//! streamed text and the tool events, and a scripted model that calls the tool, then answers.
//!
//! Run with `cargo run -p pi-rs-agent --example weather`.

use std::io::Write;
use std::sync::Arc;

use pi_agent::{Agent, AgentOptions};
use pi_providers::faux::{faux_assistant_message, faux_text, faux_tool_call, FauxProvider, FauxResponse};
use pi_types::{AgentEvent, AgentToolResult, AssistantMessageEvent, FnTool, StopReason};
use serde_json::json;

/// Arguments of `get_weather`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WeatherArgs {
    /// City name.
    city: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let weather = FnTool::typed("get_weather", "Current weather of a city", |args: WeatherArgs, _ctx| async move {
        Ok(AgentToolResult::text(format!("{}: 12°C, light rain", args.city)))
    })?;

    // A scripted model: first a tool call, then the answer that uses its result.
    let faux = FauxProvider::default();
    let arguments = json!({"city": "Oslo"}).as_object().cloned().unwrap_or_default();
    faux.set_responses([
        FauxResponse::Message(faux_assistant_message(
            vec![faux_text("Let me check."), faux_tool_call("call-1", "get_weather", arguments)],
            StopReason::ToolUse,
        )),
        FauxResponse::Message(faux_assistant_message(
            vec![faux_text("It is 12°C with light rain in Oslo.")],
            StopReason::Stop,
        )),
    ]);

    let agent = Agent::new(
        AgentOptions::new(Arc::new(faux.clone()))
            .with_model(faux.model())
            .with_system_prompt("You are a weather assistant.")
            .with_tool(weather),
    );

    let _printer = agent.subscribe_fn(|event| match event {
        AgentEvent::MessageUpdate {
            assistant_message_event: AssistantMessageEvent::TextDelta { delta, .. }, ..
        } => {
            print!("{delta}");
            let _ = std::io::stdout().flush();
        }
        AgentEvent::MessageEnd { message } if message.role() == "assistant" => println!(),
        AgentEvent::ToolExecutionStart { tool_name, args, .. } => println!("[tool] {tool_name} {args}"),
        AgentEvent::ToolExecutionEnd { tool_name, result, is_error, .. } => {
            let text: Vec<String> = result
                .content
                .iter()
                .filter_map(|block| match block {
                    pi_types::UserContent::Text(text) => Some(text.text.clone()),
                    _ => None,
                })
                .collect();
            println!("[tool] {tool_name} -> {} (error: {is_error})", text.join(""));
        }
        _ => {}
    });

    agent.prompt("What's the weather in Oslo?").await?;
    println!("{} messages in the transcript", agent.messages().len());
    Ok(())
}
