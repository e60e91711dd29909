//! The specific hint for a wrong result: which output, on which trial, how many elements and
//! where, by how much, and what that pattern usually means; read from the result's trial
//! records (`Trial`, `OutputCheck`), not from its text.

use crate::protocol::{EvalResult, OutputCheck, Trial};

/// What the trial kinds test, for the hint.
fn trial_words(kind: &str) -> Option<&'static str> {
    match kind {
        "signed" => Some(
            "standard-normal inputs (negative values too): a branch or an `other=` that assumes non-negative inputs is wrong",
        ),
        "post_timing" => Some(
            "fresh values written into the buffers used for timing: a result cached or computed once is wrong",
        ),
        _ => None,
    }
}

/// The hint, when the result has a failing output with figures.
pub fn mismatch_hint(result: &EvalResult) -> Option<String> {
    let (trial, out) = first_failure(&result.trials)?;
    let mut parts = Vec::new();
    let shape = out
        .shape
        .as_ref()
        .map(|s| {
            format!(
                " (shape ({}), {})",
                s.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                out.dtype.as_deref().unwrap_or("?")
            )
        })
        .unwrap_or_default();
    let trial_name = format!("trial {} ({})", trial.index + 1, trial.kind);
    match (out.bad_elements, out.numel) {
        (Some(bad), Some(numel)) if numel > 0 => {
            let pct = 100.0 * bad as f64 / numel as f64;
            parts.push(format!(
                "Output `{}`{shape} is wrong on {trial_name}: {bad} of {numel} elements ({}) outside tolerance",
                out.output,
                percent(pct)
            ));
            if let Some(at) = first_at(out.reason.as_deref().unwrap_or_default()) {
                parts.push(format!("the first wrong element is at {at}"));
            }
            if let (Some(err), Some(scale)) = (out.max_abs_err, out.max_abs_ref) {
                parts.push(format!(
                    "the largest error is {} where the reference's largest |value| is {}",
                    significant(err),
                    significant(scale)
                ));
            }
            parts.push(diagnosis(pct, out));
        }
        _ => {
            let reason = out.reason.as_deref().unwrap_or("wrong");
            parts.push(format!(
                "Output `{}`{shape} is wrong on {trial_name}: {}",
                out.output,
                crate::pysource::traceback::scrub_paths(reason)
            ));
        }
    }
    if let Some(words) = trial_words(&trial.kind) {
        parts.push(format!("this trial uses {words}"));
    }
    let passed: Vec<String> = result
        .trials
        .iter()
        .filter(|t| t.passed)
        .map(|t| format!("{} ({})", t.index + 1, t.kind))
        .collect();
    if !passed.is_empty() {
        parts.push(format!("trials {} passed", passed.join(", ")));
    }
    Some(format!("{}.", parts.join("; ")))
}

/// What a share of wrong elements and the size of the error usually mean.
fn diagnosis(pct: f64, out: &OutputCheck) -> String {
    let relative = match (out.max_abs_err, out.max_abs_ref) {
        (Some(e), Some(s)) if s > 0.0 => Some(e / s),
        _ => None,
    };
    if relative.is_some_and(|r| r < 1e-2) {
        "errors this small relative to the values come from the order or precision of the arithmetic: accumulate in float32, keep float32 inputs of `tl.dot` in float32 (`input_precision`), and avoid subtracting nearly equal sums".into()
    } else if pct < 5.0 {
        "only a few elements are wrong: look at the edges (the last, partial tile of a row or column, masks, loop bounds, the remainder when a size is no multiple of BLOCK) and at the indexing of those positions".into()
    } else if pct > 90.0 {
        "almost every element is wrong: the formula itself, the weight layout (`nn.Linear` is `x @ W.T`), the axis reduced, or which output is returned".into()
    } else {
        "a large share of elements is wrong: the strides or offsets of some rows/columns, the program-to-tile mapping, or a reduction over the wrong axis".into()
    }
}

/// Three significant digits, as `%.3g` writes them (`0.763`, `3e-04`, `1.2e+05`).
fn significant(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let magnitude = x.abs().log10().floor() as i32;
    if (-4..6).contains(&magnitude) {
        let decimals = (2 - magnitude).max(0) as usize;
        let text = format!("{x:.decimals$}");
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text
        }
    } else {
        format!("{x:.2e}")
    }
}

fn percent(pct: f64) -> String {
    if pct >= 1.0 {
        format!("{pct:.0}%")
    } else {
        format!("{pct:.2}%")
    }
}

/// `[15, 57]: 0 vs reference 0.678913` from a reason's `first at ...`.
fn first_at(reason: &str) -> Option<String> {
    let (_, rest) = reason.split_once("first at ")?;
    let (at, values) = rest.split_once(": ")?;
    Some(format!("index {at} ({values})"))
}

fn first_failure(trials: &[Trial]) -> Option<(&Trial, &OutputCheck)> {
    trials
        .iter()
        .filter(|t| !t.passed)
        .find_map(|t| t.outputs.iter().find(|o| !o.passed).map(|o| (t, o)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(kind: &str, out: OutputCheck) -> EvalResult {
        EvalResult {
            trials: vec![
                Trial {
                    kind: "random".into(),
                    index: 0,
                    passed: kind != "random",
                    outputs: vec![],
                },
                Trial {
                    kind: kind.into(),
                    index: 1,
                    passed: false,
                    outputs: vec![out],
                },
            ],
            ..Default::default()
        }
    }

    /// A real record: a ReLU whose mask stops 7 elements short of the end.
    fn edge() -> OutputCheck {
        OutputCheck {
            output: "out".into(),
            passed: false,
            reason: Some("out: 7 of 1024 elements outside tolerance (atol 0.0001, rtol 0.0001); max abs err 0.763, max rel err 1; first at [15, 57]: 0 vs reference 0.678913".into()),
            shape: Some(vec![16, 64]),
            dtype: Some("float32".into()),
            max_abs_err: Some(0.7633707523345947),
            max_rel_err: Some(1.0),
            max_abs_ref: Some(0.9991871118545532),
            bad_elements: Some(7),
            numel: Some(1024),
            ..Default::default()
        }
    }

    #[test]
    fn a_wrong_edge_is_named_with_its_place_and_size() {
        let hint = mismatch_hint(&result("signed", edge())).unwrap();
        assert_eq!(
            hint,
            "Output `out` (shape (16, 64), float32) is wrong on trial 2 (signed): 7 of 1024 elements (0.68%) outside tolerance; \
             the first wrong element is at index [15, 57] (0 vs reference 0.678913); \
             the largest error is 0.763 where the reference's largest |value| is 0.999; \
             only a few elements are wrong: look at the edges (the last, partial tile of a row or column, masks, loop bounds, the remainder when a size is no multiple of BLOCK) and at the indexing of those positions; \
             this trial uses standard-normal inputs (negative values too): a branch or an `other=` that assumes non-negative inputs is wrong; \
             trials 1 (random) passed."
        );
    }

    #[test]
    fn figures_have_three_significant_digits() {
        assert_eq!(significant(0.7633707523345947), "0.763");
        assert_eq!(significant(0.9991871118545532), "0.999");
        assert_eq!(significant(3e-4), "0.0003");
        assert_eq!(significant(123.456), "123");
        assert_eq!(significant(2.5e7), "2.50e7");
        assert_eq!(significant(0.0), "0");
    }

    #[test]
    fn small_errors_point_at_precision_and_total_ones_at_the_formula() {
        let mut out = edge();
        out.max_abs_err = Some(3e-4);
        out.bad_elements = Some(300);
        let hint = mismatch_hint(&result("random", out.clone())).unwrap();
        assert!(
            hint.contains("order or precision of the arithmetic"),
            "{hint}"
        );
        out.max_abs_err = Some(0.9);
        out.bad_elements = Some(1000);
        let hint = mismatch_hint(&result("random", out.clone())).unwrap();
        assert!(hint.contains("almost every element is wrong"), "{hint}");
        assert!(!hint.contains("passed"), "{hint}");
        // A structure failure has no figures: its reason is said.
        let structure = OutputCheck {
            output: "out".into(),
            reason: Some("out: shape (16,), the reference (16, 64)".into()),
            ..Default::default()
        };
        let hint = mismatch_hint(&result("random", structure)).unwrap();
        assert!(
            hint.contains("shape (16,), the reference (16, 64)"),
            "{hint}"
        );
        assert!(mismatch_hint(&EvalResult::default()).is_none());
    }
}
