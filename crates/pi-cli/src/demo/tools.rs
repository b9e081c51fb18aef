//! The built-in demo tools: a weather lookup (made-up but stable numbers), a calculator and
//! the current time in a city.

use std::sync::Arc;

use pi_types::{AgentTool, AgentToolResult, FnTool};
use serde::Deserialize;
use serde_json::json;

use super::calc;
use super::cities;
use crate::error::CliError;

/// Name of the weather tool.
pub const WEATHER: &str = "get_weather";
/// Name of the calculator tool.
pub const CALCULATE: &str = "calculate";
/// Name of the clock tool.
pub const TIME: &str = "get_time";

#[derive(Deserialize, schemars::JsonSchema)]
struct WeatherArgs {
    /// City name, e.g. "Shanghai".
    location: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct CalculateArgs {
    /// Arithmetic expression with + - * / ^ % and parentheses, e.g. "12 * (3 + 4)".
    expression: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct TimeArgs {
    /// A city (e.g. "Tokyo") or a UTC offset (e.g. "UTC+8"); UTC when absent.
    #[serde(default)]
    location: Option<String>,
}

const CONDITIONS: [&str; 8] =
    ["sunny", "partly cloudy", "overcast", "light rain", "showers", "clear skies", "fog", "light snow"];

/// A small, stable hash (FNV-1a) so a city always gets the same demo weather.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3))
}

/// The demo weather of a location: (temperature °C, conditions, humidity %, wind km/h).
pub fn demo_weather(location: &str) -> (i64, &'static str, u64, u64) {
    let hash = fnv1a(&location.trim().to_lowercase());
    let temperature = (hash % 36) as i64 - 5;
    let mut conditions = CONDITIONS[((hash >> 8) % CONDITIONS.len() as u64) as usize];
    if conditions == "light snow" && temperature > 2 {
        conditions = "light rain";
    }
    let humidity = 30 + (hash >> 16) % 61;
    let wind = 2 + (hash >> 24) % 30;
    (temperature, conditions, humidity, wind)
}

fn weather_tool() -> Result<FnTool, CliError> {
    FnTool::typed(
        WEATHER,
        "Look up the current weather of a city (demo data: made-up but stable numbers).",
        |args: WeatherArgs, _ctx| async move {
            let location = args.location.trim().to_owned();
            if location.is_empty() {
                return Err("location must not be empty".into());
            }
            let (temperature, conditions, humidity, wind) = demo_weather(&location);
            let text = format!("{location}: {temperature} °C, {conditions}, humidity {humidity}%, wind {wind} km/h");
            let details = json!({
                "location": location,
                "temperatureC": temperature,
                "conditions": conditions,
                "humidity": humidity,
                "windKph": wind,
            });
            Ok(AgentToolResult::text(text).with_details(details))
        },
    )
    .map_err(|e| CliError::Setup(format!("cannot declare the {WEATHER} tool: {e}")))
}

fn calculate_tool() -> Result<FnTool, CliError> {
    FnTool::typed(
        CALCULATE,
        "Evaluate an arithmetic expression exactly as written (+ - * / ^ %, parentheses, decimals).",
        |args: CalculateArgs, _ctx| async move {
            let value = calc::evaluate(&args.expression)?;
            let text = format!("{} = {}", args.expression.trim(), calc::format_number(value));
            Ok(AgentToolResult::text(text).with_details(json!({ "expression": args.expression, "value": value })))
        },
    )
    .map_err(|e| CliError::Setup(format!("cannot declare the {CALCULATE} tool: {e}")))
}

fn time_tool() -> Result<FnTool, CliError> {
    FnTool::typed(
        TIME,
        "The current date and time in a city or at a UTC offset (standard time, no daylight saving).",
        |args: TimeArgs, _ctx| async move {
            let requested = args.location.as_deref().map(str::trim).filter(|l| !l.is_empty());
            let (label, offset_minutes) = match requested {
                None => ("UTC".to_owned(), 0),
                Some(location) => match cities::utc_offset(location) {
                    Some(offset) => (location.to_owned(), offset),
                    None => {
                        return Err(format!(
                            "unknown time zone for \"{location}\"; name a major city or an offset like UTC+8"
                        )
                        .into())
                    }
                },
            };
            let now_ms = i64::try_from(pi_types::now_ms()).unwrap_or(0);
            let local = cities::LocalTime::at(now_ms, offset_minutes);
            let text = format!("{label}: {local}");
            let details = json!({ "location": label, "iso": local.iso(), "utcOffsetMinutes": offset_minutes });
            Ok(AgentToolResult::text(text).with_details(details))
        },
    )
    .map_err(|e| CliError::Setup(format!("cannot declare the {TIME} tool: {e}")))
}

/// The demo tools: weather, calculator and clock.
pub fn demo_tools() -> Result<Vec<Arc<dyn AgentTool>>, CliError> {
    Ok(vec![Arc::new(weather_tool()?), Arc::new(calculate_tool()?), Arc::new(time_tool()?)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weather_is_stable_and_plausible() {
        let (t1, c1, h1, w1) = demo_weather("Shanghai");
        assert_eq!(demo_weather(" shanghai "), (t1, c1, h1, w1));
        assert!((-5..=30).contains(&t1));
        assert!((30..=90).contains(&h1));
        assert!((2..=31).contains(&w1));
        assert_ne!(demo_weather("Shanghai"), demo_weather("Beijing"));
    }
}
