//! A small weather assistant on `pi-agent`: one typed tool, any model.
//!
//! The application depends on `pi-agent` alone (with its `derive` feature): the tool's
//! argument type derives its JSON Schema through `pi_agent::JsonSchema`, and every type in
//! the signatures comes from the re-exported `pi_agent::pi_types`. The model is a parameter,
//! so a test drives the same agent with a scripted one; `tests/run.rs` snapshots a run,
//! steering included (see `docs/snapshot-testing.md`).
//!
//! ```
//! use std::sync::Arc;
//! use pi_agent::pi_types::Model;
//! let model = Model::new("faux-1").with_api("faux").with_provider("faux");
//! let agent = snapshot_test::weather_agent(Arc::new(pi_providers::faux::FauxProvider::default()), model)?;
//! assert_eq!(agent.tools().len(), 1);
//! # Ok::<(), pi_agent::pi_types::TypesError>(())
//! ```

use std::sync::Arc;

use pi_agent::pi_types::{AgentToolResult, FnTool, Model, StreamFn, TypesError};
use pi_agent::{Agent, AgentOptions, JsonSchema};

/// The arguments of `get_weather`.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[schemars(crate = "pi_agent::schemars")]
pub struct WeatherArgs {
    /// City name.
    pub city: String,
    /// `"celsius"` (the default) or `"fahrenheit"`.
    #[serde(default)]
    pub unit: Option<String>,
}

/// The weather of a city from a fixed table (a real app would call a service here).
pub fn weather(args: &WeatherArgs) -> String {
    let celsius = match args.city.as_str() {
        "Oslo" => 12.0,
        "Lisbon" => 21.0,
        _ => 15.0,
    };
    match args.unit.as_deref() {
        Some("fahrenheit") => format!("{}: {}°F, light rain", args.city, celsius * 9.0 / 5.0 + 32.0),
        _ => format!("{}: {celsius}°C, light rain", args.city),
    }
}

/// The `get_weather` tool.
pub fn weather_tool() -> Result<FnTool, TypesError> {
    FnTool::typed("get_weather", "Current weather of a city", |args: WeatherArgs, _ctx| async move {
        Ok(AgentToolResult::text(weather(&args)))
    })
}

/// The assistant: a system prompt and the weather tool on the given model.
pub fn weather_agent(stream_fn: Arc<dyn StreamFn>, model: Model) -> Result<Agent, TypesError> {
    Ok(Agent::new(
        AgentOptions::new(stream_fn)
            .with_model(model)
            .with_system_prompt("You are a weather assistant. Use get_weather.")
            .with_tool(weather_tool()?),
    ))
}
