//! HdrHistogram's percentile-distribution text format (`.hgrm`), values in microseconds.

use hdrhistogram::Histogram;
use std::fmt::Write;

/// Formats `h` (recorded in ns) as a percentile distribution in microseconds, the
/// format HdrHistogram's plotters read.
pub fn percentile_distribution(h: &Histogram<u64>) -> String {
    let mut out = String::new();
    let scale = 1000.0; // ns -> us
    let _ = writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    if h.is_empty() {
        return out;
    }
    for v in h.iter_quantiles(5) {
        let q = v.quantile_iterated_to();
        let value = h.highest_equivalent(v.value_iterated_to()) as f64 / scale;
        if q < 1.0 {
            let _ = writeln!(
                out,
                "{:>12.3} {:>2.12} {:>10} {:>14.2}",
                value,
                q,
                v.count_since_last_iteration(),
                1.0 / (1.0 - q)
            );
        } else {
            let _ = writeln!(
                out,
                "{:>12.3} {:>2.12} {:>10}",
                value,
                q,
                v.count_since_last_iteration()
            );
        }
    }
    let _ = writeln!(
        out,
        "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
        h.mean() / scale,
        h.stdev() / scale
    );
    let _ = writeln!(
        out,
        "#[Max     = {:>12.3}, Total count    = {:>12}]",
        h.max() as f64 / scale,
        h.len()
    );
    let _ = writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        h.buckets(),
        h.distinct_values()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_ends_at_the_max_and_counts_everything() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let text = percentile_distribution(&h);
        assert!(text.contains("Percentile"));
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .skip(1)
            .collect();
        let total: u64 = rows
            .iter()
            .map(|l| l.split_whitespace().nth(2).unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, 1000);
        assert!(rows.last().unwrap().trim_start().starts_with("1000."));
        assert!(text.contains("Total count    =         1000"));
    }
}
