//! Token usage and cost of a response.

use serde::{Deserialize, Serialize};

/// Cost in dollars of one response, split as the usage is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageCost {
    /// Catalog-derived input cost.
    pub input: f64,
    /// Catalog-derived output cost.
    pub output: f64,
    /// Catalog-derived cache-read cost.
    pub cache_read: f64,
    /// Catalog-derived cache-write cost.
    pub cache_write: f64,
    /// Best available total: billed cost when the provider reports it, else the estimate.
    pub total: f64,
    /// True when `total` is the provider's billed cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_from_provider: Option<bool>,
}

/// Token counts of one response.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens (reasoning included).
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write: u64,
    /// Part of `cache_write` written with one-hour retention (Anthropic only).
    #[serde(default, rename = "cacheWrite1h", skip_serializing_if = "Option::is_none")]
    pub cache_write_1h: Option<u64>,
    /// Reasoning tokens, a subset of `output`, when the provider reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
    /// Total tokens.
    pub total_tokens: u64,
    /// Cost in dollars.
    pub cost: UsageCost,
}

impl Usage {
    /// Input, output and both cache counts added up (saturating): the total every provider
    /// reports when it sends no total of its own.
    pub fn token_sum(&self) -> u64 {
        self.input.saturating_add(self.output).saturating_add(self.cache_read).saturating_add(self.cache_write)
    }
}
