//! Prompt-cache warming policy (pi-ai's `cache-warming.js`): when a refresh of a cached prompt
//! is due, whether the request can be replayed for it, and whether the refresh pays for itself.
//!
//! A host that keeps a conversation's prompt cache warm replays its last request capped at one
//! output token shortly before the cache entry expires. This module owns the numbers; the
//! host owns the scheduling. A refresh costs reading the cached prompt plus one output token;
//! it saves, if the next real request comes before expiry, the difference between writing (or
//! reading uncached) the prompt again and reading it from the cache. While the agent streams
//! the next request is certain; while it sits idle it comes with
//! [`IDLE_CONTINUATION_PROBABILITY`]. A refresh is worth it when the expected saving reaches
//! [`MINIMUM_EXPECTED_SAVINGS`] dollars.

use pi_types::{CacheRetention, CancellationToken, Model, StreamOptions, Usage};
use serde::Serialize;

use crate::cost::calculate_cost;

/// Streaming warming never continues past this long after the real request that started it.
pub const MAX_AGE_MS: u64 = 60 * 60_000;
/// Idle warming stops earlier: continuation estimates get less reliable with age.
pub const MAX_IDLE_AGE_MS: u64 = 30 * 60_000;
/// The least expected saving, in dollars, that makes a refresh worth sending.
pub const MINIMUM_EXPECTED_SAVINGS: f64 = 0.05;
/// The chance that a real request arrives before expiry while the agent sits idle (measured
/// by pi's authors on their own usage).
pub const IDLE_CONTINUATION_PROBABILITY: f64 = 0.15;

/// When a refresh would run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheWarmingPhase {
    /// While the agent streams (the next request is certain).
    Streaming,
    /// While the agent waits for its user.
    Idle,
}

/// What to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheWarmingAction {
    /// Send the refresh.
    Warm,
    /// Let the entry expire.
    Stop,
}

/// The economics of one refresh (pi-ai's `CacheWarmingDecision`, field for field).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheWarmingDecision {
    /// The phase evaluated.
    pub phase: CacheWarmingPhase,
    /// Dollars a refresh costs: the cached prompt read plus one output token.
    pub warm_cost: f64,
    /// Dollars a cache miss costs over a hit (never negative).
    pub miss_cost: f64,
    /// The chance that a real request comes before expiry.
    pub continuation_probability: f64,
    /// `continuation_probability * miss_cost - warm_cost`.
    pub expected_savings: f64,
    /// Whether the model has prices for a non-empty prompt at all.
    pub economics_available: bool,
    /// Warm when the expected saving reaches [`MINIMUM_EXPECTED_SAVINGS`].
    pub action: CacheWarmingAction,
}

/// The refresh delay for a cache entry living `ttl_ms`: 90% of it, keeping at least ten
/// seconds of margin; `None` for lifetimes of ten seconds or less.
pub fn cache_warming_delay_ms(ttl_ms: u64) -> Option<u64> {
    if ttl_ms <= 10_000 {
        return None;
    }
    let ninety_percent = (ttl_ms as f64 * 0.9).floor() as u64;
    Some(ninety_percent.min(ttl_ms - 10_000).max(1))
}

/// The lifetime of the cache entry a request with `options` writes: the model's `promptCache`
/// entry for the retention used (`cache_retention`, else `PI_CACHE_RETENTION=long`, else
/// short). `None` when caching is off or the model has no lifetime for that retention.
pub fn prompt_cache_ttl_ms(model: &Model, options: &StreamOptions) -> Option<u64> {
    let retention = options.cache_retention.unwrap_or_else(|| {
        if options.env_var("PI_CACHE_RETENTION").as_deref() == Some("long") {
            CacheRetention::Long
        } else {
            CacheRetention::Short
        }
    });
    let cache = model.prompt_cache.as_ref()?;
    let seconds = match retention {
        CacheRetention::None => return None,
        CacheRetention::Short => cache.short?,
        CacheRetention::Long => cache.long?,
    };
    seconds.checked_mul(1000)
}

/// Whether replaying the request with a one-token output cap leaves its cache entry as it is.
/// Not for Anthropic's budget-based thinking (a reasoning request on `anthropic-messages`
/// without `forceAdaptiveThinking`): its thinking budget derives from `max_tokens`, and
/// Anthropic keys the cache on the budget.
pub fn is_cache_warming_replayable(model: &Model, options: &StreamOptions) -> bool {
    if options.reasoning.is_none() || model.api != "anthropic-messages" {
        return true;
    }
    model.compat.as_ref().and_then(|c| c.get("forceAdaptiveThinking")).and_then(serde_json::Value::as_bool)
        == Some(true)
}

/// The options of a refresh: the request's own, capped at one output token, without retries,
/// without continuation state (a refresh must not replace the conversation's message thread),
/// cancelled by `cancel`.
pub fn cache_warming_request_options(options: &StreamOptions, cancel: Option<CancellationToken>) -> StreamOptions {
    StreamOptions { max_tokens: Some(1), disable_continuation: true, max_retries: Some(0), cancel, ..options.clone() }
}

/// Whether refreshing the cache entry of a `prompt_tokens`-token request pays for itself in
/// `phase`.
pub fn evaluate_cache_warming(model: &Model, prompt_tokens: u64, phase: CacheWarmingPhase) -> CacheWarmingDecision {
    let hit = price(model, Usage { cache_read: prompt_tokens, ..Usage::default() });
    let miss = if model.cost.cache_write > 0.0 {
        price(model, Usage { cache_write: prompt_tokens, ..Usage::default() })
    } else {
        price(model, Usage { input: prompt_tokens, ..Usage::default() })
    };
    let warm_cost = price(model, Usage { cache_read: prompt_tokens, output: 1, ..Usage::default() });
    let miss_cost = (miss - hit).max(0.0);
    let continuation_probability = match phase {
        CacheWarmingPhase::Idle => IDLE_CONTINUATION_PROBABILITY,
        CacheWarmingPhase::Streaming => 1.0,
    };
    let expected_savings = continuation_probability * miss_cost - warm_cost;
    CacheWarmingDecision {
        phase,
        warm_cost,
        miss_cost,
        continuation_probability,
        expected_savings,
        economics_available: prompt_tokens > 0 && (hit > 0.0 || miss > 0.0),
        action: if expected_savings >= MINIMUM_EXPECTED_SAVINGS {
            CacheWarmingAction::Warm
        } else {
            CacheWarmingAction::Stop
        },
    }
}

fn price(model: &Model, mut usage: Usage) -> f64 {
    calculate_cost(model, &mut usage).total
}
