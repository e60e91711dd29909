//! Figures as text, shared by every view that shows them (`kforge eval`, the TUI's Eval
//! tab and tree, the session report, the batch summary, the events' own summaries): a
//! score with its 95% interval, a median with its interval, and whether two intervals can
//! tell two measurements apart. How a timing was taken, in words, is `timing_text`.

/// `1.23x`, or `1.23x [1.20-1.26]` with an interval.
pub fn score_with_interval(score: f64, interval: Option<(f64, f64)>) -> String {
    match interval {
        Some((low, high)) => format!("{score:.2}x [{low:.2}-{high:.2}]"),
        None => format!("{score:.2}x"),
    }
}

/// `1.23x [1.20-1.26]`, or `n/a` without a score.
pub fn score_text(score: Option<f64>, interval: Option<(f64, f64)>) -> String {
    score.map_or_else(|| "n/a".into(), |s| score_with_interval(s, interval))
}

/// `2.4600 ms [2.4500-2.4700]`, or `2.4600 ms` without an interval.
pub fn ms_with_interval(median_ms: f64, interval: Option<(f64, f64)>) -> String {
    match interval {
        Some((low, high)) => format!("{median_ms:.4} ms [{low:.4}-{high:.4}]"),
        None => format!("{median_ms:.4} ms"),
    }
}

/// A duration as every view writes it: `42s`, `3m05s`, `2h07m` (the TUI's status bar and
/// batch view, `kforge batch status`, the batch summary).
pub fn duration_text(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

/// Whether two intervals overlap: neither clears the other, so the measurements cannot
/// tell which is faster.
pub fn overlap(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_written_one_way() {
        assert_eq!(duration_text(0.4), "0s");
        assert_eq!(duration_text(42.0), "42s");
        assert_eq!(duration_text(485.0), "8m05s");
        assert_eq!(duration_text(7620.0), "2h07m");
        assert_eq!(duration_text(-3.0), "0s");
    }

    #[test]
    fn scores_and_medians_show_their_interval_when_they_have_one() {
        assert_eq!(
            score_with_interval(1.234, Some((1.2, 1.26))),
            "1.23x [1.20-1.26]"
        );
        assert_eq!(score_with_interval(1.234, None), "1.23x");
        assert_eq!(score_text(None, Some((1.0, 2.0))), "n/a");
        assert_eq!(
            ms_with_interval(2.46, Some((2.45, 2.47))),
            "2.4600 ms [2.4500-2.4700]"
        );
        assert_eq!(ms_with_interval(2.46, None), "2.4600 ms");
    }

    #[test]
    fn intervals_overlap_when_neither_clears_the_other() {
        assert!(overlap((1.2, 1.8), (1.43, 1.47)));
        assert!(overlap((1.0, 1.5), (1.5, 2.0)), "touching");
        assert!(!overlap((1.0, 1.4), (1.43, 1.47)));
        assert!(!overlap((1.5, 1.6), (1.43, 1.47)));
    }
}
