//! Cost of a response from the model's prices (`calculateCost`).

use pi_types::{Model, Usage, UsageCost};

/// Fill `usage.cost` from the model's per-million-token prices (tiered by input size) and
/// return it. One-hour cache writes cost twice the base input price.
pub fn calculate_cost(model: &Model, usage: &mut Usage) -> UsageCost {
    let input_tokens = usage.input.saturating_add(usage.cache_read).saturating_add(usage.cache_write);
    let (mut input, mut output, mut cache_read, mut cache_write) =
        (model.cost.input, model.cost.output, model.cost.cache_read, model.cost.cache_write);
    let mut matched: i128 = -1;
    for tier in model.cost.tiers.iter().flatten() {
        let above = i128::from(tier.input_tokens_above);
        if i128::from(input_tokens) > above && above > matched {
            (input, output, cache_read, cache_write) = (tier.input, tier.output, tier.cache_read, tier.cache_write);
            matched = above;
        }
    }
    let long_write = usage.cache_write_1h.unwrap_or(0) as f64;
    let short_write = usage.cache_write as f64 - long_write;
    let cost = &mut usage.cost;
    cost.input = (input / 1_000_000.0) * usage.input as f64;
    cost.output = (output / 1_000_000.0) * usage.output as f64;
    cost.cache_read = (cache_read / 1_000_000.0) * usage.cache_read as f64;
    cost.cache_write = (cache_write * short_write + input * 2.0 * long_write) / 1_000_000.0;
    cost.total = cost.input + cost.output + cost.cache_read + cost.cache_write;
    cost.total_from_provider = Some(false);
    cost.clone()
}
