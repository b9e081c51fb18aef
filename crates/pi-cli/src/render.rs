//! Printing agent events: the streamed answer (pretty), one line per event (`--events`) or
//! one JSON object per event (`--json`).
//!
//! A [`Renderer`] is fed every [`AgentEvent`] of a run in order (it is an agent listener).
//! Pretty output writes text deltas as they arrive, thinking dimmed, each tool call with
//! its arguments and result, and after `agent_end` one summary line (stop reason, turns,
//! token usage). Events output names each event in brackets the way pi's walkthroughs print
//! them and writes deltas inline. JSON output is the event's wire JSON, unnormalized.
//! Writes are best effort: a closed pipe must not fail the run.

use std::io::Write;
use std::time::Duration;

use anstyle::{AnsiColor, Style};
use indicatif::{ProgressBar, ProgressStyle};
use pi_types::{AgentEvent, AgentMessage, AssistantMessageEvent, StopReason, Usage};

use crate::args::OutputMode;

const DIM: Style = Style::new().dimmed();
const TOOL: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Cyan)));
const OK: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
const FAILED: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)));
const TAG: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Blue)));

/// Whether to colour output written to stdout (honours `NO_COLOR`, `CLICOLOR_FORCE` and
/// whether stdout is a terminal).
pub fn stdout_colors() -> bool {
    !matches!(anstream::AutoStream::choice(&std::io::stdout()), anstream::ColorChoice::Never)
}

/// The stop reason's wire name (`stop`, `toolUse`, ...).
pub fn stop_reason_name(reason: StopReason) -> String {
    serde_json::to_value(reason).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// Renders the events of runs to a writer.
pub struct Renderer {
    mode: OutputMode,
    out: Box<dyn Write + Send>,
    color: bool,
    spinner_enabled: bool,
    spinner: Option<ProgressBar>,
    /// Whether the cursor is at the start of a line.
    at_line_start: bool,
    /// Per run: turns ended, usage summed over assistant messages, user messages seen.
    turns: usize,
    usage: Usage,
    user_messages: usize,
    last_stop: Option<StopReason>,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer").field("mode", &self.mode).field("color", &self.color).finish_non_exhaustive()
    }
}

impl Renderer {
    /// A renderer writing to `out`, with ANSI colours when `color`.
    pub fn new(mode: OutputMode, out: Box<dyn Write + Send>, color: bool) -> Self {
        Self {
            mode,
            out,
            color: color && mode != OutputMode::Json,
            spinner_enabled: false,
            spinner: None,
            at_line_start: true,
            turns: 0,
            usage: Usage::default(),
            user_messages: 0,
            last_stop: None,
        }
    }

    /// Show a spinner on stderr while waiting for the model (pretty mode, stderr a terminal).
    pub fn with_spinner(mut self, enabled: bool) -> Self {
        self.spinner_enabled = enabled && self.mode == OutputMode::Pretty;
        self
    }

    fn styled(&self, style: Style, text: &str) -> String {
        if self.color {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_owned()
        }
    }

    fn write_raw(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let _ = self.out.write_all(text.as_bytes());
        self.at_line_start = text.ends_with('\n');
    }

    /// Write `text` inline, in `style` when set.
    fn inline(&mut self, style: Option<Style>, text: &str) {
        let text = match style {
            Some(style) if !text.is_empty() => self.styled(style, text),
            _ => text.to_owned(),
        };
        self.write_raw(&text);
        // Deltas must appear as they arrive.
        let _ = self.out.flush();
    }

    /// Write a whole line, first ending a line left open by inline text.
    pub fn line(&mut self, text: &str) {
        self.stop_spinner();
        if !self.at_line_start {
            self.write_raw("\n");
        }
        self.write_raw(text);
        self.write_raw("\n");
        let _ = self.out.flush();
    }

    /// Write a dimmed notice line (in JSON mode on stderr, keeping stdout pure events).
    pub fn notice(&mut self, text: &str) {
        if self.mode == OutputMode::Json {
            eprintln!("{text}");
            return;
        }
        let text = self.styled(DIM, text);
        self.line(&text);
    }

    fn start_spinner(&mut self) {
        if !self.spinner_enabled || self.spinner.is_some() {
            return;
        }
        let spinner = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
            spinner.set_style(style);
        }
        spinner.set_message("waiting for the model…");
        spinner.enable_steady_tick(Duration::from_millis(80));
        self.spinner = Some(spinner);
    }

    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    /// Render one event.
    pub fn event(&mut self, event: &AgentEvent) {
        if let AgentEvent::AgentStart = event {
            self.turns = 0;
            self.usage = Usage::default();
            self.user_messages = 0;
            self.last_stop = None;
        }
        self.track(event);
        match self.mode {
            OutputMode::Json => self.json(event),
            OutputMode::Events => self.events(event),
            OutputMode::Pretty => self.pretty(event),
        }
    }

    fn track(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::TurnEnd { .. } => self.turns += 1,
            AgentEvent::MessageStart { message: AgentMessage::User(_) } => self.user_messages += 1,
            AgentEvent::MessageEnd { message: AgentMessage::Assistant(message) } => {
                let usage = &message.usage;
                self.usage.input = self.usage.input.saturating_add(usage.input);
                self.usage.output = self.usage.output.saturating_add(usage.output);
                self.usage.cache_read = self.usage.cache_read.saturating_add(usage.cache_read);
                self.usage.cache_write = self.usage.cache_write.saturating_add(usage.cache_write);
                self.usage.total_tokens = self.usage.total_tokens.saturating_add(usage.total_tokens);
                self.usage.cost.total += usage.cost.total;
                self.last_stop = Some(message.stop_reason);
            }
            _ => {}
        }
    }

    fn json(&mut self, event: &AgentEvent) {
        if let Ok(text) = serde_json::to_string(event) {
            let _ = writeln!(self.out, "{text}");
            let _ = self.out.flush();
        }
    }

    /// The summary line printed after a run.
    pub fn summary(&self) -> String {
        let reason = self.last_stop.map(stop_reason_name).unwrap_or_else(|| "none".into());
        let turns = if self.turns == 1 { "1 turn".to_owned() } else { format!("{} turns", self.turns) };
        let usage = &self.usage;
        let mut text = format!(
            "[{reason} · {turns} · tokens: {} in, {} out, {} total",
            usage.input, usage.output, usage.total_tokens
        );
        if usage.cache_read > 0 || usage.cache_write > 0 {
            text.push_str(&format!(" (cache: {} read, {} written)", usage.cache_read, usage.cache_write));
        }
        if usage.cost.total > 0.0 {
            text.push_str(&format!(" · ${:.4}", usage.cost.total));
        }
        text.push(']');
        text
    }

    fn pretty(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::TurnStart => self.start_spinner(),
            AgentEvent::MessageStart { message: AgentMessage::User(user) } if self.user_messages > 1 => {
                let text = format!("↳ {}", user.content.text());
                self.notice(&text);
            }
            AgentEvent::MessageUpdate { assistant_message_event, .. } => {
                if !matches!(assistant_message_event, AssistantMessageEvent::Start { .. }) {
                    self.stop_spinner();
                }
                match assistant_message_event {
                    AssistantMessageEvent::TextDelta { delta, .. } => self.inline(None, delta),
                    AssistantMessageEvent::ThinkingDelta { delta, .. } => self.inline(Some(DIM), delta),
                    AssistantMessageEvent::TextEnd { .. } | AssistantMessageEvent::ThinkingEnd { .. }
                        if !self.at_line_start =>
                    {
                        self.inline(None, "\n");
                    }
                    _ => {}
                }
            }
            AgentEvent::MessageEnd { message: AgentMessage::Assistant(_) } => self.stop_spinner(),
            AgentEvent::ToolExecutionStart { tool_name, args, .. } => {
                let text = self.styled(TOOL, &format!("→ {tool_name}({})", pi_types::json::stringify(args)));
                self.line(&text);
            }
            AgentEvent::ToolExecutionEnd { tool_name, result, is_error, .. } => {
                let content = pi_types::content_text(&result.content, " ");
                let (style, verb) = if *is_error { (FAILED, "failed: ") } else { (OK, "") };
                let text = self.styled(style, &format!("← {tool_name}: {verb}{content}"));
                self.line(&text);
            }
            AgentEvent::AgentEnd { .. } => {
                self.stop_spinner();
                // A failed run prints its error on stderr instead (and nothing here).
                if self.last_stop != Some(StopReason::Error) {
                    let summary = self.summary();
                    self.notice(&summary);
                }
            }
            _ => {}
        }
    }

    fn tag(&self, name: &str) -> String {
        self.styled(TAG, &format!("[{name}]"))
    }

    fn events(&mut self, event: &AgentEvent) {
        let name = event.type_name();
        match event {
            AgentEvent::AgentStart | AgentEvent::TurnStart => {
                let tag = self.tag(name);
                self.line(&tag);
            }
            AgentEvent::AgentEnd { messages } => {
                let tag = self.tag(name);
                self.line(&format!("{tag} messages={}", messages.len()));
            }
            AgentEvent::TurnEnd { message, tool_results } => {
                let reason = match message {
                    AgentMessage::Assistant(m) => stop_reason_name(m.stop_reason),
                    other => other.role().to_owned(),
                };
                let tag = self.tag(name);
                self.line(&format!("{tag} stopReason={reason} toolResults={}", tool_results.len()));
            }
            AgentEvent::MessageStart { message } | AgentEvent::MessageEnd { message } => {
                let tag = self.tag(name);
                let mut text = format!("{tag} role={}", message.role());
                if let (AgentEvent::MessageEnd { .. }, AgentMessage::Assistant(m)) = (event, message) {
                    text.push_str(&format!(" stopReason={}", stop_reason_name(m.stop_reason)));
                    if let Some(error) = &m.error_message {
                        text.push_str(&format!(" errorMessage={}", pi_types::json::stringify(&(&**error).into())));
                    }
                }
                self.line(&text);
            }
            AgentEvent::MessageUpdate { assistant_message_event: update, .. } => self.events_update(update),
            AgentEvent::ToolExecutionStart { tool_name, args, .. } => {
                let tag = self.tag(name);
                self.line(&format!("{tag} {tool_name}({})", pi_types::json::stringify(args)));
            }
            AgentEvent::ToolExecutionUpdate { tool_name, partial_result, .. } => {
                let tag = self.tag(name);
                let content = pi_types::content_text(&partial_result.content, " ");
                self.line(&format!("{tag} {tool_name}: {content}"));
            }
            AgentEvent::ToolExecutionEnd { tool_name, result, is_error, .. } => {
                let tag = self.tag(name);
                let content = pi_types::content_text(&result.content, " ");
                self.line(&format!("{tag} {tool_name} isError={is_error}: {content}"));
            }
        }
    }

    fn events_update(&mut self, update: &AssistantMessageEvent) {
        let tag = format!("{}{}", self.tag("message_update"), self.tag(update.type_name()));
        match update {
            AssistantMessageEvent::TextDelta { delta, .. } | AssistantMessageEvent::ToolcallDelta { delta, .. } => {
                self.inline(None, delta);
            }
            AssistantMessageEvent::ThinkingDelta { delta, .. } => self.inline(Some(DIM), delta),
            AssistantMessageEvent::ToolcallEnd { tool_call, .. } => {
                let args = serde_json::Value::Object(tool_call.arguments.clone());
                self.line(&format!("{tag} {}({})", tool_call.name, pi_types::json::stringify(&args)));
            }
            AssistantMessageEvent::Done { reason, .. } => {
                self.line(&format!("{tag} reason={}", stop_reason_name(*reason)));
            }
            AssistantMessageEvent::Error { reason, error } => {
                let message = error.error_message.as_deref().unwrap_or("");
                let quoted = pi_types::json::stringify(&message.into());
                self.line(&format!("{tag} reason={} errorMessage={quoted}", stop_reason_name(*reason)));
            }
            _ => self.line(&tag),
        }
    }
}

impl Drop for Renderer {
    fn drop(&mut self) {
        self.stop_spinner();
        if !self.at_line_start {
            let _ = self.out.write_all(b"\n");
        }
        let _ = self.out.flush();
    }
}
