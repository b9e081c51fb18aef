//! The offline demo's "model": a faux-provider script that reads the latest user message,
//! calls the demo tools it asks for (all in one turn, so they run in parallel), and answers
//! from their results.
//!
//! Planning is keyword-based and general: every known city (or capitalized place name after
//! "in"/"for"/"and") is looked up when the prompt asks about weather, every arithmetic
//! expression goes to the calculator, and a question about the time asks the clock for each
//! city (or UTC).

use std::sync::{Arc, LazyLock};

use pi_providers::faux::{
    faux_assistant_message, faux_text, faux_thinking, faux_tool_call, FauxOptions, FauxProvider, FauxRequest,
    FauxResponse, FauxResponseFn,
};
use pi_types::{
    AssistantMessage, AssistantMessageEventStream, JsonObject, Message, Model, StopReason, StreamFn, StreamOptions,
    ToolResultMessage, TranscriptContext,
};
use regex::Regex;
use serde_json::{json, Value};

use super::calc;
use super::cities::CITIES;
use super::tools::{CALCULATE, TIME, WEATHER};

/// Streaming pace of the demo, so answers visibly arrive token by token.
const DEMO_TOKENS_PER_SECOND: f64 = 200.0;

/// One tool call the demo makes.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedCall {
    /// Tool name.
    pub tool: &'static str,
    /// Arguments.
    pub args: Value,
}

static WEATHER_WORDS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(weather|temperature|forecast|rain(ing|y)?|sunny|snow(ing)?|hot|cold|warm|humid|wind(y)?)\b")
        .ok()
});
static TIME_WORDS: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\b(time|clock|date|what day|o'clock)\b").ok());
/// Capitalized phrases after a preposition or a list separator: place names the list lacks.
static PLACE_PHRASES: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?:\b(?:in|at|for|and|of)\s+|,\s*|&\s*)((?:[A-Z][\p{L}'\-]+)(?:\s+[A-Z][\p{L}'\-]+)*)").ok()
});
/// Runs of characters that can form an arithmetic expression.
static EXPRESSION_RUNS: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"[0-9.+\-*/×÷^%()\s_]+").ok());
static OPERATOR_BETWEEN_NUMBERS: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"[0-9)]\s*[+\-*/×÷^%]\s*[-+(]*\s*[0-9.(]").ok());
static DATE_LIKE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^\d{4}-\d{1,2}(-\d{1,2})?$|^\d{1,2}/\d{1,2}(/\d{2,4})?$").ok());

fn matches(regex: &LazyLock<Option<Regex>>, text: &str) -> bool {
    regex.as_ref().is_some_and(|r| r.is_match(text))
}

/// Word operators written as symbols ("3 times 4" → "3 * 4").
fn symbolize(prompt: &str) -> String {
    let mut text = format!(" {prompt} ");
    for (words, symbol) in [
        (" multiplied by ", " * "),
        (" divided by ", " / "),
        (" times ", " * "),
        (" plus ", " + "),
        (" minus ", " - "),
        (" over ", " / "),
        (" to the power of ", " ^ "),
    ] {
        text = text.replace(words, symbol);
    }
    text
}

/// Arithmetic expressions in the prompt, in order, each one evaluable.
pub fn expressions(prompt: &str) -> Vec<String> {
    let Some(runs) = EXPRESSION_RUNS.as_ref() else { return Vec::new() };
    let text = symbolize(prompt);
    let mut found = Vec::new();
    for run in runs.find_iter(&text) {
        let candidate = run.as_str().trim().trim_end_matches(['.', ' ']).trim();
        if !matches(&OPERATOR_BETWEEN_NUMBERS, candidate) || matches(&DATE_LIKE, candidate) {
            continue;
        }
        if calc::evaluate(candidate).is_ok() && !found.iter().any(|f: &String| f == candidate) {
            found.push(candidate.to_owned());
        }
    }
    found
}

const NOT_PLACES: [&str; 16] = [
    "I", "What", "What's", "Whats", "How", "Is", "Are", "The", "Tell", "Please", "And", "Also", "Weather", "Time",
    "Today", "Tomorrow",
];

/// Places named in the prompt, in order of appearance, without duplicates.
pub fn places(prompt: &str) -> Vec<String> {
    let lower = prompt.to_lowercase();
    let mut found: Vec<(usize, String)> = Vec::new();
    for city in CITIES {
        let name = city.name.to_lowercase();
        let mut from = 0;
        while let Some(at) = lower.get(from..).and_then(|rest| rest.find(&name)).map(|i| i + from) {
            let before = lower[..at].chars().next_back();
            let after = lower[at + name.len()..].chars().next();
            if !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric) {
                found.push((at, city.name.to_owned()));
                break;
            }
            from = at + name.len();
        }
    }
    if let Some(phrases) = PLACE_PHRASES.as_ref() {
        for capture in phrases.captures_iter(prompt) {
            let Some(phrase) = capture.get(1) else { continue };
            let words: Vec<&str> = phrase.as_str().split_whitespace().skip_while(|w| NOT_PLACES.contains(w)).collect();
            if words.is_empty() {
                continue;
            }
            let name = words.join(" ").trim_end_matches(['\'', '-']).to_owned();
            let known = found.iter().any(|(_, f)| name.to_lowercase().contains(&f.to_lowercase()));
            if !known {
                found.push((phrase.start(), name));
            }
        }
    }
    found.sort_by_key(|(at, _)| *at);
    let mut names: Vec<String> = Vec::new();
    for (_, name) in found {
        if !names.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
            names.push(name);
        }
    }
    names
}

/// The tool calls the demo makes for a prompt in a conversation: a follow-up that only names
/// places ("and Paris?") asks what the earlier messages asked (weather, time).
pub fn plan_in_context(prompt: &str, earlier: &str) -> Vec<PlannedCall> {
    let places = places(prompt);
    let asks_nothing = !matches(&WEATHER_WORDS, prompt) && !matches(&TIME_WORDS, prompt);
    let context = if asks_nothing && !places.is_empty() { earlier } else { "" };
    let mut calls = Vec::new();
    if matches(&WEATHER_WORDS, prompt) || matches(&WEATHER_WORDS, context) {
        calls.extend(places.iter().map(|p| PlannedCall { tool: WEATHER, args: json!({ "location": p }) }));
    }
    calls.extend(
        expressions(prompt).into_iter().map(|e| PlannedCall { tool: CALCULATE, args: json!({ "expression": e }) }),
    );
    if matches(&TIME_WORDS, prompt) || matches(&TIME_WORDS, context) {
        if places.is_empty() {
            calls.push(PlannedCall { tool: TIME, args: json!({}) });
        }
        calls.extend(places.iter().map(|p| PlannedCall { tool: TIME, args: json!({ "location": p }) }));
    }
    calls
}

fn describe(calls: &[PlannedCall]) -> String {
    let mut parts = Vec::new();
    let arg = |call: &PlannedCall, key: &str| call.args.get(key).and_then(Value::as_str).map(str::to_owned);
    let weather: Vec<String> = calls.iter().filter(|c| c.tool == WEATHER).filter_map(|c| arg(c, "location")).collect();
    if !weather.is_empty() {
        parts.push(format!("check the weather in {}", join_names(&weather)));
    }
    let sums: Vec<String> = calls.iter().filter(|c| c.tool == CALCULATE).filter_map(|c| arg(c, "expression")).collect();
    if !sums.is_empty() {
        parts.push(format!("work out {} with the calculator", join_names(&sums)));
    }
    let clocks: Vec<String> =
        calls.iter().filter(|c| c.tool == TIME).map(|c| arg(c, "location").unwrap_or_else(|| "UTC".into())).collect();
    if !clocks.is_empty() {
        parts.push(format!("check the time in {}", join_names(&clocks)));
    }
    join_names(&parts)
}

fn join_names(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn first_turn(prompt: &str, earlier: &str, request_number: usize) -> AssistantMessage {
    let calls = plan_in_context(prompt, earlier);
    if calls.is_empty() {
        let text = "I'm the offline demo, so all I can do is run the demo tools: the weather in a city, \
                    arithmetic such as 12 * (3 + 4), and the current time somewhere. Try \"What's the weather \
                    in Shanghai and Beijing?\" or \"What time is it in Tokyo?\"";
        return faux_assistant_message(vec![faux_text(text)], StopReason::Stop);
    }
    let what = describe(&calls);
    let plan = if calls.len() > 1 {
        format!("{} independent tool calls, so I'll make them in parallel", calls.len())
    } else {
        "one tool call".to_owned()
    };
    let mut content =
        vec![faux_thinking(format!("To answer I need to {what}: {plan}.")), faux_text(format!("Let me {what}."))];
    for (index, call) in calls.into_iter().enumerate() {
        let args: JsonObject = call.args.as_object().cloned().unwrap_or_default();
        content.push(faux_tool_call(format!("call_{request_number}_{}", index + 1), call.tool, args));
    }
    faux_assistant_message(content, StopReason::ToolUse)
}

fn result_text(result: &ToolResultMessage) -> String {
    pi_types::content_text(&result.content, " ")
}

fn answer(results: &[&ToolResultMessage]) -> AssistantMessage {
    let mut lines = Vec::new();
    let mut temperatures: Vec<(String, i64)> = Vec::new();
    for result in results {
        if result.is_error {
            lines.push(format!("- {} failed: {}", result.tool_name, result_text(result)));
            continue;
        }
        lines.push(format!("- {}", result_text(result)));
        if result.tool_name == WEATHER {
            let details = result.details.as_ref();
            let place = details.and_then(|d| d.get("location")).and_then(Value::as_str);
            let temperature = details.and_then(|d| d.get("temperatureC")).and_then(Value::as_i64);
            if let (Some(place), Some(temperature)) = (place, temperature) {
                temperatures.push((place.to_owned(), temperature));
            }
        }
    }
    let mut text = format!("Here is what the tools report:\n{}", lines.join("\n"));
    let warmest = temperatures.iter().max_by_key(|(_, t)| *t);
    let coldest = temperatures.iter().min_by_key(|(_, t)| *t);
    if let (Some((warm, high)), Some((cold, low)), true) = (warmest, coldest, temperatures.len() > 1) {
        if high == low {
            text.push_str(&format!("\n\n{} all read {high} °C.", join_names(&names(&temperatures))));
        } else {
            let gap = high.saturating_sub(*low);
            let lead = if temperatures.len() == 2 { format!("{warm} is") } else { format!("{warm} is the warmest,") };
            text.push_str(&format!("\n\n{lead} {gap} °C warmer than {cold}."));
        }
    }
    if results.iter().any(|r| r.tool_name == WEATHER && !r.is_error) {
        text.push_str("\n\n(Offline demo: the weather numbers are made up.)");
    }
    faux_assistant_message(vec![faux_text(text)], StopReason::Stop)
}

fn names(temperatures: &[(String, i64)]) -> Vec<String> {
    temperatures.iter().map(|(name, _)| name.clone()).collect()
}

/// The demo's reply to a request.
///
/// User messages after the last assistant message (a prompt plus any steering delivered with
/// it) are planned together; when they ask for no tool, or when only tool results follow the
/// last assistant message, the reply answers from every tool result since the last final
/// answer.
pub fn respond(messages: &[Message], request_number: usize) -> AssistantMessage {
    let last_assistant = messages.iter().rposition(|m| matches!(m, Message::Assistant(_)));
    let fresh = last_assistant.map_or(messages, |at| &messages[at + 1..]);
    let prompt: Vec<String> = fresh
        .iter()
        .filter_map(|m| match m {
            Message::User(user) => Some(user.content.text()),
            _ => None,
        })
        .collect();
    let fresh_start = messages.len() - fresh.len();
    let earlier: Vec<String> = messages[..fresh_start]
        .iter()
        .filter_map(|m| match m {
            Message::User(user) => Some(user.content.text()),
            _ => None,
        })
        .collect();
    let earlier = earlier.last().cloned().unwrap_or_default();
    if !prompt.is_empty() {
        let planned = first_turn(&prompt.join("\n"), &earlier, request_number);
        if planned.stop_reason == StopReason::ToolUse {
            return planned;
        }
    }
    // Tool results since the last final answer (an assistant message that called no tool).
    let since_final = messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant(a) if a.stop_reason != StopReason::ToolUse))
        .map_or(0, |at| at + 1);
    let results: Vec<&ToolResultMessage> = messages[since_final..]
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(result) => Some(&**result),
            _ => None,
        })
        .collect();
    if results.is_empty() {
        return first_turn(&prompt.join("\n"), &earlier, request_number);
    }
    answer(&results)
}

/// The demo provider: a [`FauxProvider`] whose script never runs out.
#[derive(Clone)]
pub struct DemoProvider {
    faux: FauxProvider,
    step: FauxResponseFn,
}

impl std::fmt::Debug for DemoProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemoProvider").finish_non_exhaustive()
    }
}

impl Default for DemoProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl DemoProvider {
    /// The demo on the faux provider (provider id `faux`, model `faux-1`).
    pub fn new() -> Self {
        let faux =
            FauxProvider::new(FauxOptions { tokens_per_second: Some(DEMO_TOKENS_PER_SECOND), ..Default::default() });
        let step: FauxResponseFn = Arc::new(|request: &FauxRequest| {
            let reply = respond(request.context.messages(), request.call_count);
            Box::pin(std::future::ready(Ok(reply)))
        });
        Self { faux, step }
    }

    /// The demo model.
    pub fn model(&self) -> Model {
        self.faux.model()
    }
}

impl StreamFn for DemoProvider {
    fn stream(&self, model: &Model, context: TranscriptContext, options: StreamOptions) -> AssistantMessageEventStream {
        if self.faux.pending_response_count() == 0 {
            self.faux.append_responses([FauxResponse::Build(Arc::clone(&self.step))]);
        }
        self.faux.stream(model, context, options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_types::AssistantContent;

    /// The tool calls the demo makes for a prompt on its own.
    fn plan(prompt: &str) -> Vec<PlannedCall> {
        plan_in_context(prompt, "")
    }

    fn tools(prompt: &str) -> Vec<(String, Value)> {
        plan(prompt).into_iter().map(|c| (c.tool.to_owned(), c.args)).collect()
    }

    /// Tool calls of an assistant message.
    fn tool_calls(message: &AssistantMessage) -> Vec<(String, Value)> {
        message
            .content
            .iter()
            .filter_map(|c| match c {
                AssistantContent::ToolCall(call) => {
                    Some((call.name.to_string(), Value::Object(call.arguments.clone())))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_readme_question_looks_up_both_cities() {
        assert_eq!(
            tools("What's the weather in Shanghai and Beijing?"),
            vec![
                (WEATHER.to_owned(), json!({"location": "Shanghai"})),
                (WEATHER.to_owned(), json!({"location": "Beijing"})),
            ]
        );
    }

    #[test]
    fn places_come_from_the_list_and_from_capitalized_names() {
        assert_eq!(places("weather in new york, Paris & Tokyo?"), ["New York", "Paris", "Tokyo"]);
        assert_eq!(places("Is it raining in Timbuktu or in Oslo?"), ["Timbuktu", "Oslo"]);
        assert_eq!(places("What's up?"), Vec::<String>::new());
    }

    #[test]
    fn expressions_and_times_are_planned() {
        assert_eq!(expressions("What is 12 * (3 + 4) and 7 / 2?"), ["12 * (3 + 4)", "7 / 2"]);
        assert_eq!(expressions("what is 3 times 4 plus 1"), ["3 * 4 + 1"]);
        assert_eq!(expressions("on 2026-12-01 I have 3 cats"), Vec::<String>::new());
        assert_eq!(tools("What time is it?"), vec![(TIME.to_owned(), json!({}))]);
        assert_eq!(
            tools("What time is it in Tokyo, and what's 2^10?"),
            vec![
                (CALCULATE.to_owned(), json!({"expression": "2^10"})),
                (TIME.to_owned(), json!({"location": "Tokyo"})),
            ]
        );
    }

    #[test]
    fn a_follow_up_naming_places_asks_what_the_last_prompt_asked() {
        let weather = plan_in_context("and Paris?", "What's the weather in Oslo?");
        assert_eq!(weather, [PlannedCall { tool: WEATHER, args: json!({"location": "Paris"}) }]);
        let time = plan_in_context("And in Sydney?", "What time is it in Tokyo?");
        assert_eq!(time, [PlannedCall { tool: TIME, args: json!({"location": "Sydney"}) }]);
        assert!(plan_in_context("Paris is nice", "Tell me a joke").is_empty());
    }

    #[test]
    fn no_tool_no_call() {
        assert!(plan("Tell me a joke").is_empty());
        let reply = respond(&[Message::from(pi_types::UserMessage::text("hello"))], 1);
        assert_eq!(reply.stop_reason, StopReason::Stop);
        assert!(tool_calls(&reply).is_empty());
    }
}
