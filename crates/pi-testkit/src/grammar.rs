//! The event grammar of a run, checked over any recorded event sequence.
//!
//! ```text
//! run      = agent_start turn_start message* turn (turn_start message* turn)* agent_end
//! turn     = ... turn_end            (turn_end closes each turn_start)
//! message  = message_start message_update* message_end      (updates only for assistant messages)
//! tool     = tool_execution_start tool_execution_update* tool_execution_end
//! ```
//! Messages never interleave with each other; tool executions may interleave with each
//! other (parallel mode) but each call id starts once and ends once, and every update falls
//! between its start and end.

use std::collections::HashSet;

use pi_types::{AgentEvent, AgentMessage};

/// A violation of the grammar: the index of the offending event and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("event {index} ({event}): {problem}")]
pub struct GrammarError {
    /// Position in the sequence.
    pub index: usize,
    /// The event type.
    pub event: &'static str,
    /// What is wrong.
    pub problem: String,
}

/// Check one run's events (from `agent_start` to `agent_end`).
pub fn check_run(events: &[AgentEvent]) -> Result<(), GrammarError> {
    let mut checker = Checker::default();
    for (index, event) in events.iter().enumerate() {
        checker.step(event).map_err(|problem| GrammarError { index, event: event.type_name(), problem })?;
    }
    if checker.state != RunState::Ended {
        return Err(GrammarError { index: events.len(), event: "end", problem: "the run never ended".into() });
    }
    Ok(())
}

/// Check a sequence of whole runs (an agent's events across several prompts).
pub fn check_runs(events: &[AgentEvent]) -> Result<usize, GrammarError> {
    let mut checker = RunsChecker::default();
    for event in events {
        checker.step(event)?;
    }
    checker.finish()
}

/// [`check_runs`] one event at a time, for a listener that checks while the agent runs.
///
/// ```
/// use pi_testkit::grammar::RunsChecker;
/// use pi_types::AgentEvent;
/// let mut checker = RunsChecker::default();
/// for event in [AgentEvent::AgentStart, AgentEvent::TurnStart] {
///     checker.step(&event).unwrap();
/// }
/// assert_eq!(checker.finish().unwrap_err().problem, "a run never ended");
/// ```
#[derive(Default)]
pub struct RunsChecker {
    run: Checker,
    index: usize,
    runs: usize,
}

impl RunsChecker {
    /// Check the next event; the error names its position in the whole sequence.
    pub fn step(&mut self, event: &AgentEvent) -> Result<(), GrammarError> {
        if self.run.state == RunState::Ended {
            self.run = Checker::default();
        }
        let index = self.index;
        self.index += 1;
        self.run.step(event).map_err(|problem| GrammarError { index, event: event.type_name(), problem })?;
        if self.run.state == RunState::Ended {
            self.runs += 1;
        }
        Ok(())
    }

    /// The number of runs, or an error when the last run has not ended.
    pub fn finish(&self) -> Result<usize, GrammarError> {
        if self.run.state == RunState::Running {
            return Err(GrammarError { index: self.index, event: "end", problem: "a run never ended".into() });
        }
        Ok(self.runs)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum RunState {
    #[default]
    NotStarted,
    Running,
    Ended,
}

#[derive(Default)]
struct Checker {
    state: RunState,
    in_turn: bool,
    open_message: Option<bool>,
    open_tools: HashSet<pi_types::CompactString>,
    finished_tools: HashSet<pi_types::CompactString>,
}

impl Checker {
    fn step(&mut self, event: &AgentEvent) -> Result<(), String> {
        match (self.state, event) {
            (RunState::NotStarted, AgentEvent::AgentStart) => {
                self.state = RunState::Running;
                return Ok(());
            }
            (RunState::NotStarted, _) => return Err("the run must start with agent_start".into()),
            (RunState::Ended, _) => return Err("event after agent_end".into()),
            (RunState::Running, _) => {}
        }
        match event {
            AgentEvent::AgentStart => Err("second agent_start".into()),
            AgentEvent::AgentEnd { .. } => {
                if self.in_turn || self.open_message.is_some() || !self.open_tools.is_empty() {
                    return Err("agent_end with a turn, message or tool still open".into());
                }
                self.state = RunState::Ended;
                Ok(())
            }
            AgentEvent::TurnStart => {
                if self.in_turn {
                    return Err("turn_start inside a turn".into());
                }
                self.in_turn = true;
                Ok(())
            }
            AgentEvent::TurnEnd { .. } => {
                if !self.in_turn || self.open_message.is_some() || !self.open_tools.is_empty() {
                    return Err("turn_end outside a turn or with open messages/tools".into());
                }
                self.in_turn = false;
                Ok(())
            }
            AgentEvent::MessageStart { message } => {
                if self.open_message.is_some() {
                    return Err("message_start inside another message".into());
                }
                self.open_message = Some(matches!(message, AgentMessage::Assistant(_)));
                Ok(())
            }
            AgentEvent::MessageUpdate { .. } => match self.open_message {
                Some(true) => Ok(()),
                Some(false) => Err("message_update for a non-assistant message".into()),
                None => Err("message_update outside a message".into()),
            },
            AgentEvent::MessageEnd { .. } => {
                self.open_message.take().map(|_| ()).ok_or_else(|| "message_end without message_start".into())
            }
            AgentEvent::ToolExecutionStart { tool_call_id, .. } => {
                if self.finished_tools.contains(tool_call_id) || !self.open_tools.insert(tool_call_id.clone()) {
                    return Err(format!("tool call {tool_call_id} started twice"));
                }
                Ok(())
            }
            AgentEvent::ToolExecutionUpdate { tool_call_id, .. } => {
                if self.open_tools.contains(tool_call_id) {
                    Ok(())
                } else {
                    Err(format!("update for tool call {tool_call_id} that is not running"))
                }
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => {
                if !self.open_tools.remove(tool_call_id) {
                    return Err(format!("end for tool call {tool_call_id} that is not running"));
                }
                self.finished_tools.insert(tool_call_id.clone());
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_checked_one_after_another() {
        let run = [AgentEvent::AgentStart, AgentEvent::AgentEnd { messages: vec![] }];
        let twice: Vec<AgentEvent> = run.iter().chain(run.iter()).cloned().collect();
        assert_eq!(check_runs(&twice), Ok(2));
        let error = check_runs(&[run[0].clone(), run[1].clone(), run[1].clone()]).map_err(|e| (e.index, e.problem));
        assert_eq!(error, Err((2, "the run must start with agent_start".to_owned())));
        assert_eq!(check_runs(&[]), Ok(0));
    }

    #[test]
    fn rejects_an_unended_message() {
        let message = AgentMessage::from(pi_types::UserMessage::text("x"));
        let events = vec![
            AgentEvent::AgentStart,
            AgentEvent::TurnStart,
            AgentEvent::MessageStart { message: message.clone() },
            AgentEvent::AgentEnd { messages: vec![message] },
        ];
        assert_eq!(check_run(&events).map_err(|e| e.index), Err(3));
    }
}
