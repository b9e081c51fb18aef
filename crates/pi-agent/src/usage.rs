//! Token and cost totals of an agent: its last run and its whole life.
//!
//! Each assistant message that ends (`message_end`) adds its `usage` to both totals; a run's
//! total starts from zero when the run starts. Costs are what the provider computed with the
//! catalog's prices (`usage.cost`, pi-ai's `calculateCost`), summed; a failure message (no
//! response) counts with zero tokens.

use pi_types::{Usage, UsageCost};

/// Token and cost totals ([`Agent::usage`](crate::Agent::usage)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UsageTotals {
    /// The current run's (or, when idle, the last run's) responses.
    pub run: UsageTotal,
    /// Every response since the agent was made.
    pub total: UsageTotal,
}

/// The sum of the usage of some responses (in JSON: `{"responses": N, "usage": {...}}`, the
/// usage in the reference's wire shape; session stores keep it so).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UsageTotal {
    /// The assistant messages counted.
    pub responses: u64,
    /// Their token counts and costs, added up (counts saturate).
    pub usage: Usage,
}

impl UsageTotal {
    /// Add one response's usage.
    pub fn add(&mut self, usage: &Usage) {
        self.responses = self.responses.saturating_add(1);
        let sum = &mut self.usage;
        sum.input = sum.input.saturating_add(usage.input);
        sum.output = sum.output.saturating_add(usage.output);
        sum.cache_read = sum.cache_read.saturating_add(usage.cache_read);
        sum.cache_write = sum.cache_write.saturating_add(usage.cache_write);
        sum.total_tokens = sum.total_tokens.saturating_add(usage.total_tokens);
        sum.cache_write_1h = add_optional(sum.cache_write_1h, usage.cache_write_1h);
        sum.reasoning = add_optional(sum.reasoning, usage.reasoning);
        let (cost, add) = (&mut sum.cost, &usage.cost);
        cost.input += add.input;
        cost.output += add.output;
        cost.cache_read += add.cache_read;
        cost.cache_write += add.cache_write;
        cost.total += add.total;
        // Billed only while every response counted so far was billed.
        cost.total_from_provider = match (self.responses, cost.total_from_provider, add.total_from_provider) {
            (1, _, billed) => billed,
            (_, Some(true), Some(true)) => Some(true),
            (_, None, None) => None,
            _ => Some(false),
        };
    }

    /// The total cost in dollars.
    pub fn cost(&self) -> &UsageCost {
        &self.usage.cost
    }
}

fn add_optional(sum: Option<u64>, add: Option<u64>) -> Option<u64> {
    match (sum, add) {
        (None, None) => None,
        (sum, add) => Some(sum.unwrap_or(0).saturating_add(add.unwrap_or(0))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, dollars: f64, billed: Option<bool>) -> Usage {
        Usage {
            input,
            output,
            total_tokens: input.saturating_add(output),
            cost: UsageCost {
                input: dollars / 2.0,
                output: dollars / 2.0,
                total: dollars,
                total_from_provider: billed,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn sums_counts_and_costs_and_tracks_whether_all_were_billed() {
        let mut total = UsageTotal::default();
        total.add(&usage(10, 5, 0.25, Some(true)));
        total.add(&usage(u64::MAX, 1, 0.5, Some(true)));
        assert_eq!(total.responses, 2);
        assert_eq!(total.usage.input, u64::MAX);
        assert_eq!(total.usage.output, 6);
        assert_eq!(total.cost().total, 0.75);
        assert_eq!(total.cost().total_from_provider, Some(true));
        total.add(&usage(1, 1, 0.0, None));
        assert_eq!(total.cost().total_from_provider, Some(false));
        assert_eq!(total.usage.reasoning, None);
    }
}
