//! `cargo xtask bench --runs N`: every case N times, runs interleaved (run 1 of every case, then
//! run 2, ...) so a slow phase of the machine spreads over all cases, as the reference's
//! `run-all.mjs` does; then a Markdown table of medians and min–max.

use serde_json::Value;

/// The output lines of one case's runs.
pub struct CaseRuns {
    /// `WORKLOAD:SIZE` plus the flags that changed the case.
    pub label: String,
    /// One parsed output line per run.
    pub lines: Vec<Value>,
}

fn number(line: &Value, key: &str) -> Option<f64> {
    line.get(key).and_then(Value::as_f64)
}

fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 1 => values.get(middle).copied(),
        _ => Some((values.get(middle - 1)? + values.get(middle)?) / 2.0),
    }
}

fn spread(values: &[f64]) -> Option<(f64, f64)> {
    let min = values.iter().copied().reduce(f64::min)?;
    let max = values.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.round());
    let (sign, digits) = digits.strip_prefix('-').map_or(("", digits.as_str()), |d| ("-", d));
    let mut out = String::new();
    for (index, c) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

/// Milliseconds: one decimal below a second, else whole milliseconds with separators.
fn millis(value: f64) -> String {
    if value < 1000.0 {
        format!("{value:.1}")
    } else {
        thousands(value)
    }
}

/// The Markdown table: per case, events, wall ms median (min–max), events/s median (min–max),
/// peak RSS median (min–max), the median of others' load in cores (when it was measured).
pub fn table(cases: &[CaseRuns]) -> String {
    let mut out = String::from(
        "| case | events | wall ms, median (min–max) | events/s, median (min–max) | peak RSS MB, median (min–max) \
         | others' load, cores (median) | runs |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for case in cases {
        let column = |key: &str| case.lines.iter().filter_map(|l| number(l, key)).collect::<Vec<f64>>();
        let (mut wall, mut rate, mut rss) = (column("wallMs"), column("eventsPerSec"), column("peakRssMb"));
        let events = case.lines.first().and_then(|l| number(l, "events")).unwrap_or_default();
        let (wall_lo, wall_hi) = spread(&wall).unwrap_or_default();
        let (rate_lo, rate_hi) = spread(&rate).unwrap_or_default();
        let (rss_lo, rss_hi) = spread(&rss).unwrap_or_default();
        let others = median(&mut column("othersCores")).map_or_else(|| "n/a".to_owned(), |c| format!("{c:.2}"));
        out.push_str(&format!(
            "| {} | {} | {} ({}–{}) | {} ({}–{}) | {:.1} ({:.1}–{:.1}) | {others} | {} |\n",
            case.label,
            thousands(events),
            millis(median(&mut wall).unwrap_or_default()),
            millis(wall_lo),
            millis(wall_hi),
            thousands(median(&mut rate).unwrap_or_default()),
            thousands(rate_lo),
            thousands(rate_hi),
            median(&mut rss).unwrap_or_default(),
            rss_lo,
            rss_hi,
            case.lines.len(),
        ));
    }
    out
}

/// `--against`: per case, the other build's and this build's events/s (median, min–max), their
/// ratio and their median peak RSS.
pub fn comparison(before: &[CaseRuns], current: &[CaseRuns]) -> String {
    let mut out = String::from(
        "| case | before: events/s, median (min–max) | current: events/s, median (min–max) | current / before \
         | peak RSS MB, before / current | runs |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (before, current) in before.iter().zip(current) {
        let column =
            |case: &CaseRuns, key: &str| case.lines.iter().filter_map(|l| number(l, key)).collect::<Vec<f64>>();
        let rates = |case: &CaseRuns| {
            let mut rate = column(case, "eventsPerSec");
            let (lo, hi) = spread(&rate).unwrap_or_default();
            (median(&mut rate).unwrap_or_default(), lo, hi)
        };
        let ((old, old_lo, old_hi), (new, new_lo, new_hi)) = (rates(before), rates(current));
        let ratio = if old > 0.0 { format!("{:.3}", new / old) } else { "n/a".to_owned() };
        out.push_str(&format!(
            "| {} | {} ({}–{}) | {} ({}–{}) | {ratio} | {:.1} / {:.1} | {} |\n",
            current.label,
            thousands(old),
            thousands(old_lo),
            thousands(old_hi),
            thousands(new),
            thousands(new_lo),
            thousands(new_hi),
            median(&mut column(before, "peakRssMb")).unwrap_or_default(),
            median(&mut column(current, "peakRssMb")).unwrap_or_default(),
            current.lines.len(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_spreads_and_thousands() {
        let lines = [(120.0, 2_000_000.0, 20.0), (100.0, 2_500_000.0, 22.0), (140.0, 1_800_000.0, 21.0)]
            .iter()
            .map(|(wall, rate, rss)| {
                serde_json::json!({"events": 250010, "wallMs": wall, "eventsPerSec": rate, "peakRssMb": rss})
            })
            .collect();
        let text = table(&[CaseRuns { label: "stream:1000000".into(), lines }]);
        assert!(
            text.ends_with("| stream:1000000 | 250,010 | 120.0 (100.0–140.0) | 2,000,000 (1,800,000–2,500,000) | 21.0 (20.0–22.0) | n/a | 3 |\n"),
            "{text}"
        );
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn comparison_of_two_builds() {
        let runs = |rates: [f64; 3], rss: f64| CaseRuns {
            label: "loopstream:1000000".into(),
            lines: rates.iter().map(|r| serde_json::json!({"eventsPerSec": r, "peakRssMb": rss})).collect(),
        };
        let text = comparison(&[runs([8e6, 9e6, 10e6], 7.2)], &[runs([9e6, 9.9e6, 11e6], 7.4)]);
        assert!(
            text.ends_with(
                "| loopstream:1000000 | 9,000,000 (8,000,000–10,000,000) | 9,900,000 (9,000,000–11,000,000) \
                 | 1.100 | 7.2 / 7.4 | 3 |\n"
            ),
            "{text}"
        );
    }
}
