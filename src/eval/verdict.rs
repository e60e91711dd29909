//! The human-readable verdict `kforge eval` prints.

use std::fmt::Write as _;

use crate::protocol::{
    Category, CompileDeferral, EvalResult, PrecisionRecord, Timing, TimingStats, figures,
    timing_text,
};

/// Terminal styling; `plain()` for pipes, files and `NO_COLOR`.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    color: bool,
}

impl Style {
    pub fn plain() -> Style {
        Style { color: false }
    }

    /// Colours when `is_terminal` and `NO_COLOR` is unset or empty.
    pub fn detect(is_terminal: bool) -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            color: is_terminal && !no_color,
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
    fn good(&self, t: &str) -> String {
        self.paint("1;32", t)
    }
    fn bad(&self, t: &str) -> String {
        self.paint("1;31", t)
    }
    fn warn(&self, t: &str) -> String {
        self.paint("33", t)
    }
    fn dim(&self, t: &str) -> String {
        self.paint("2", t)
    }
    fn bold(&self, t: &str) -> String {
        self.paint("1", t)
    }
}

/// Renders the verdict. `log_path` is where the full result was saved, if it was.
pub fn render(result: &EvalResult, log_path: Option<&std::path::Path>, style: Style) -> String {
    let mut out = String::new();
    let d = &result.device;
    let device = if d.kind == "cuda" {
        format!(
            "{} ({}, compute capability {})",
            d.name.as_deref().unwrap_or("CUDA device"),
            d.kind,
            d.capability.as_deref().unwrap_or("?")
        )
    } else {
        "CPU through Triton's interpreter".to_string()
    };
    let v = &result.versions;
    let _ = writeln!(
        out,
        "{} {}  {}",
        style.dim("device"),
        device,
        style.dim(&format!(
            "python {} · torch {} · triton {}",
            v.python.as_deref().unwrap_or("?"),
            v.torch.as_deref().unwrap_or("?"),
            v.triton.as_deref().unwrap_or("?")
        ))
    );
    if let Some(sandbox) = &result.sandbox {
        if sandbox.enforced {
            let _ = writeln!(out, "{} {}", style.dim("sandbox"), sandbox.detail);
        } else {
            let _ = writeln!(
                out,
                "{} {}",
                style.bad("NO SANDBOX:"),
                style.bad(&format!(
                    "the kernel ran with your rights ({})",
                    sandbox.reason
                ))
            );
        }
        match &sandbox.task {
            Some(task) if task.enforced => {
                let _ = writeln!(out, "{} {}", style.dim("task   "), task.detail);
            }
            Some(task) => {
                let _ = writeln!(out, "{} {}", style.bad("TASK:"), style.bad(&task.detail));
            }
            None => {}
        }
    }

    if result.correct {
        let random = result.trials.iter().filter(|t| t.kind == "random").count();
        let mut checks = vec![format!("{random}/{random} trials")];
        if result.trials.iter().any(|t| t.kind == "signed") {
            checks.push("signed-input trial".into());
        }
        if result.trials.iter().any(|t| t.kind == "post_timing") {
            checks.push("re-check with fresh values in reused buffers".into());
        }
        let _ = writeln!(out, "{}  {}", style.good("CORRECT"), checks.join(", "));
        let (abs, rel) = max_errors(result);
        let _ = writeln!(
            out,
            "  max abs err {abs:.3e}   max rel err {rel:.3e}   ({}{})",
            tolerance_text(result),
            scaled_tolerance(result)
        );
        if let Some(audit) = &result.audit
            && !audit.summary.is_empty()
        {
            // Every correctness forward is audited; the summary is the signed-input one's.
            let forwards = audit
                .details
                .get("audited_forwards")
                .and_then(serde_json::Value::as_u64)
                .map(|n| format!(" ({n} forwards)"))
                .unwrap_or_default();
            let _ = writeln!(out, "  audit{forwards}: {}", audit.summary);
        }
    } else {
        let category = result.category.unwrap_or(Category::Harness);
        let label = if result.is_task_fault() {
            "TASK ERROR"
        } else {
            "FAILED"
        };
        let _ = writeln!(
            out,
            "{}  {}: {}",
            style.bad(label),
            style.bold(category.as_str()),
            result.summary
        );
        let message = result.message.trim();
        if !message.is_empty() && message != result.summary.trim() {
            let brief = brief_message(message);
            for line in &brief.lines {
                let _ = writeln!(out, "  {line}");
            }
            if brief.left_out > 0 {
                let _ = writeln!(
                    out,
                    "  {}",
                    style.dim(&format!(
                        "({} more lines of the harness, torch and triton: the whole message is in the result below)",
                        brief.left_out
                    ))
                );
            }
        }
    }

    if let Some(p) = &result.precision {
        render_precision(&mut out, p, style);
    }
    if let Some(sol) = result.speed_of_light.as_ref().filter(|_| result.correct) {
        // `speed of light 0.0123 ms (memory-bound): ...`, or the counts and why no bound.
        let text = match sol.bound_ms {
            Some(_) => sol.describe(),
            None => format!("speed of light: {}", sol.describe()),
        };
        let text = if sol.faster_than_light {
            style.warn(&text)
        } else {
            style.dim(&text)
        };
        let _ = writeln!(out, "{text}");
    }

    if let Some(a) = &result.alignment {
        let mut parts = Vec::new();
        if !a.by_name.is_empty() {
            parts.push(format!("{} by name", a.by_name.len()));
        }
        if !a.by_shape.is_empty() {
            let pairs: Vec<String> = a
                .by_shape
                .iter()
                .map(|(r, k)| format!("{r} -> {k}"))
                .collect();
            parts.push(format!("by shape: {}", pairs.join(", ")));
        }
        if !a.unmatched_reference.is_empty() {
            parts.push(format!(
                "unmatched in the reference: {}",
                a.unmatched_reference.join(", ")
            ));
        }
        if !a.unmatched_kernel.is_empty() {
            parts.push(format!(
                "unmatched in the kernel: {}",
                a.unmatched_kernel.join(", ")
            ));
        }
        if !parts.is_empty() {
            let _ = writeln!(out, "  parameters aligned: {}", parts.join("; "));
        }
    }

    match &result.timing {
        // Timings of a kernel that failed a check (the re-check after timing, say) are
        // in the JSON but not worth showing: it has no score.
        Some(t) if t.meaningful && result.correct => render_timing(&mut out, t, style),
        _ if result.correct && result.device.kind != "cuda" => {
            let _ = writeln!(
                out,
                "{}  not meaningful on the CPU (Triton interpreter): correctness only",
                style.bold("timing")
            );
        }
        _ => {}
    }

    if let Some(line) = memory_line(result) {
        let _ = writeln!(out, "{}  {line}", style.bold("memory"));
    }

    for w in &result.static_report.warnings {
        let _ = writeln!(out, "{} {}", style.warn("warning:"), w.message);
    }
    for flag in &result.flags {
        let _ = writeln!(out, "{} {}", style.warn("flag:"), flag);
    }
    for note in &result.notes {
        let _ = writeln!(out, "{} {}", style.dim("note:"), note);
    }
    if let Some(profile) = &result.profile {
        render_profile(&mut out, profile, style);
    }
    if let Some(path) = log_path {
        let _ = writeln!(
            out,
            "{}",
            style.dim(&format!("full result and log: {}", path.display()))
        );
    }
    out
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// "peak 30.2 GiB of 79.1 GiB in use (planned 30.5 GiB: inputs 6.0 GiB, outputs 6.0 GiB)":
/// GPU results only (the device-wide peak is not sampled on the CPU).
fn memory_line(result: &EvalResult) -> Option<String> {
    let peak = result.peak_memory_bytes()?;
    let plan = result.footprint.as_ref()?;
    let model = if plan.weights_bytes > 0 {
        format!(", model {}", gib(plan.weights_bytes))
    } else {
        String::new()
    };
    Some(format!(
        "peak {} of {} in use (planned {}: inputs {}, outputs {}{model})",
        gib(peak),
        gib(plan.total_bytes),
        gib(plan.planned_peak_bytes),
        gib(plan.inputs_bytes),
        gib(plan.outputs_bytes)
    ))
}

/// The precision line: the policy with its tolerance per task dtype, what the kernel
/// computes in (in red when below what the policy accepts), and the reference's settings.
fn render_precision(out: &mut String, p: &PrecisionRecord, style: Style) {
    let _ = write!(out, "{} {}", style.dim("precision"), p.headline());
    if !p.statement.is_empty() {
        let said = if p.is_reduced() {
            style.warn(&p.statement)
        } else {
            p.statement.clone()
        };
        let _ = write!(out, "; {said}");
    }
    let _ = writeln!(out);
    if let Some(s) = &p.reference_settings {
        let _ = writeln!(
            out,
            "  {}",
            style.dim(&format!("reference: {}", s.describe()))
        );
    }
}

/// The tolerances the comparison used: per output under the `oracle` rule its error as a
/// multiple of the honest error (`out: error 4.6x the honest error (limit 128x; float64
/// oracle)`), `float32 atol=rtol 1e-4` per dtype under the others, or the explicit ones;
/// the mode where it is not the default, and why an output fell back.
fn tolerance_text(result: &EvalResult) -> String {
    let Some(t) = &result.tolerance else {
        return "tolerance unknown".into();
    };
    let mut parts: Vec<String> = t
        .outputs
        .iter()
        .map(|(path, o)| {
            if o.is_oracle() {
                format!("{path} {}", o.describe())
            } else {
                o.describe()
            }
        })
        .collect();
    parts.sort();
    parts.dedup();
    let mut text = if !parts.is_empty() {
        parts.join("; ")
    } else {
        match (t.atol, t.rtol) {
            (Some(a), Some(r)) => format!("atol {a:e}, rtol {r:e}"),
            _ => "exact".into(),
        }
    };
    if t.mode != "oracle" && !t.mode.is_empty() {
        text.push_str(&format!("; tolerance {}", t.mode));
    }
    let fallbacks: Vec<String> = t
        .outputs
        .iter()
        .filter_map(|(path, o)| o.fallback.as_ref().map(|why| format!("{path}: {why}")))
        .collect();
    if t.mode == "oracle" && !fallbacks.is_empty() {
        text.push_str(&format!(
            "; no float64 oracle ({}): the dtype rule",
            fallbacks.join("; ")
        ));
    }
    text
}

/// ", effective atol 2.0e-5 on out" where the scaled rule shrank atol for some output.
fn scaled_tolerance(result: &EvalResult) -> String {
    let Some(t) = &result.tolerance else {
        return String::new();
    };
    let scaled: Vec<String> = t
        .effective_atol
        .iter()
        .filter(|(output, v)| {
            let given = t.outputs.get(*output).and_then(|o| o.atol).or(t.atol);
            given.is_some_and(|a| **v < a)
        })
        .map(|(output, v)| format!("{v:.1e} on {output}"))
        .collect();
    if scaled.is_empty() {
        String::new()
    } else {
        format!(
            "; atol scaled to the output's magnitude: {}",
            scaled.join(", ")
        )
    }
}

/// The timing block: the method, each side's median with its interval and the runs'
/// figures, the score with its interval, the reported-time ratio, the environment.
fn render_timing(out: &mut String, t: &Timing, style: Style) {
    let flushed = if t.flush_l2_bytes > 0 {
        ", L2 flushed before each run"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "{}  {}{flushed}",
        style.bold("timing"),
        timing_text::method_text(t.method.as_deref(), t.forwards_per_window)
    );
    let cached = if t.reference.cached {
        "  [cached baseline]"
    } else {
        ""
    };
    for (name, s, tail) in [
        ("reference", &t.reference, cached),
        ("kernel", &t.kernel, ""),
    ] {
        let noisy = if s.noisy {
            format!("  {}", style.warn("noisy"))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {name:<10} {}{noisy}  {}{tail}",
            figures::ms_with_interval(s.median_ms, s.interval()),
            runs_text(s)
        );
        let _ = writeln!(out, "  {:<10} {}", "", style.dim(&stats_detail(s)));
    }
    compile_lines(out, t, style);
    if let Some(score) = t.score {
        let text = figures::score_with_interval(score, t.score_interval());
        let painted = if score >= 1.0 {
            style.good(&text)
        } else {
            style.warn(&text)
        };
        let noisy = if t.noisy {
            format!("  {}", style.warn("noisy"))
        } else {
            String::new()
        };
        let basis = match &t.interval_method {
            Some(m) if t.score_interval().is_some() => {
                format!("reference median / kernel median; 95% interval: {m}")
            }
            _ => "reference median / kernel median".into(),
        };
        let label = if t.compile.is_some() || t.compile_deferred.is_some() {
            "vs eager"
        } else {
            "score"
        };
        let _ = writeln!(out, "  {label:<10} {painted}{noisy}  ({basis})");
    }
    vs_compile_line(out, t, style);
    if let Some(line) = t.defaults_line() {
        let _ = writeln!(out, "  {:<10} {line}", "vs defaults");
    }
    headline_line(out, t);
    if let Some(reported) = t.reported_score {
        let _ = writeln!(
            out,
            "  {:<10} {}",
            "reported",
            style.dim(&format!(
                "{reported:.2}x  (the ratio of the CUDA-event medians the processes reported themselves: information only)"
            ))
        );
    }
    if let Some(env) = &t.environment {
        let lines = timing_text::environment_lines(env);
        if !lines.is_empty() {
            let _ = writeln!(out, "{}", style.bold("environment"));
            for (label, text) in lines {
                let _ = writeln!(out, "  {label:<10} {text}");
            }
        }
    }
}

/// The compiled reference's line: its figures, why there are none, or that they are being
/// measured after this verdict (`kforge eval` on a GPU, the figure not cached yet).
fn compile_lines(out: &mut String, t: &Timing, style: Style) {
    if let Some(compile) = &t.compile {
        let text = compile.describe();
        let painted = if compile.error.is_some() {
            style.warn(&text)
        } else {
            text
        };
        let _ = writeln!(out, "  {:<10} {painted}", "compiled");
    } else if t.compile_deferred == Some(CompileDeferral::Pending) {
        let _ = writeln!(
            out,
            "  {:<10} {}",
            "compiled",
            style.dim(
                "torch.compile is not cached yet for this task and device: the score against it is being measured now, after this verdict"
            )
        );
    }
}

fn vs_compile_line(out: &mut String, t: &Timing, style: Style) {
    if let Some(score) = t.score_vs_compile {
        let text = figures::score_with_interval(score, t.score_vs_compile_interval());
        let painted = if score >= 1.0 {
            style.good(&text)
        } else {
            style.warn(&text)
        };
        let _ = writeln!(
            out,
            "  {:<10} {painted}  (compiled reference median / kernel median: the score vs eager x compiled / eager)",
            "vs compile"
        );
    }
}

fn headline_line(out: &mut String, t: &Timing) {
    if let Some(reason) = &t.baseline_reason {
        let _ = writeln!(
            out,
            "  {:<10} {}  ({reason})",
            "headline",
            t.headline_baseline().label()
        );
    }
}

/// The block `kforge eval` prints once the torch.compile figure its verdict deferred was
/// measured and the timing re-scored against it (`launch::evaluate::compile_after_verdict`):
/// the figure (or why there is none), the score against it, and the headline's baseline now.
pub fn render_compile_after_verdict(t: &Timing, style: Style) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        style.bold(
            "torch.compile, measured after the verdict (now cached for this task and device):"
        )
    );
    compile_lines(&mut out, t, style);
    vs_compile_line(&mut out, t, style);
    let (score, interval) = t.score_against(t.headline_baseline());
    let figure = score.map_or(String::new(), |s| {
        format!(" {}", figures::score_with_interval(s, interval))
    });
    if let Some(reason) = &t.baseline_reason {
        let _ = writeln!(
            out,
            "  {:<10} now {}{figure}  ({reason})",
            "headline",
            t.headline_baseline().label()
        );
    }
    out
}

/// `120 runs`, `300 runs, precision not reached, 2 gate timeouts`.
fn runs_text(s: &TimingStats) -> String {
    let mut parts = vec![format!("{} runs", s.runs)];
    if s.budget_limited {
        parts.push("cut by the time budget".into());
    }
    match s.precision_reached {
        Some(true) => parts.push("precision reached".into()),
        Some(false) => parts.push("precision not reached".into()),
        None => {}
    }
    if s.gate_timeouts > 0 {
        parts.push(format!(
            "{} gate timeout{}",
            s.gate_timeouts,
            if s.gate_timeouts == 1 { "" } else { "s" }
        ));
    }
    parts.join(", ")
}

/// `mean 2.4610, min 2.4400, max 2.6000, std 0.0100; window 2.7600 less null 0.3000;
/// reported 2.4400`: what is known of the runs beyond the median.
fn stats_detail(s: &TimingStats) -> String {
    let mut parts = vec![format!(
        "mean {:.4}, min {:.4}, max {:.4}, std {:.4}",
        s.mean_ms, s.min_ms, s.max_ms, s.std_ms
    )];
    match (s.window_median_ms, s.null_ms) {
        (Some(w), Some(n)) => parts.push(format!("window {w:.4} less null {n:.4}")),
        (Some(w), None) => parts.push(format!("window {w:.4}")),
        _ => {}
    }
    if let Some(r) = s.reported_median_ms {
        parts.push(format!("reported {r:.4}"));
    }
    parts.join("; ")
}

fn max_errors(result: &EvalResult) -> (f64, f64) {
    let outputs = result.trials.iter().flat_map(|t| t.outputs.iter());
    outputs.fold((0.0f64, 0.0f64), |(a, r), o| {
        (
            a.max(o.max_abs_err.unwrap_or(0.0)),
            r.max(o.max_rel_err.unwrap_or(0.0)),
        )
    })
}

fn render_profile(out: &mut String, profile: &serde_json::Value, style: Style) {
    if profile.get("available").and_then(|v| v.as_bool()) != Some(true) {
        let reason = profile
            .get("reason")
            .and_then(|v| v.as_str())
            .unwrap_or("unavailable");
        let _ = writeln!(out, "{} {}", style.warn("profile:"), reason);
        return;
    }
    let _ = writeln!(
        out,
        "{}  Nsight Compute, one forward",
        style.bold("profile")
    );
    for kernel in profile
        .get("kernels")
        .and_then(|k| k.as_array())
        .into_iter()
        .flatten()
    {
        let name = kernel.get("name").and_then(|n| n.as_str()).unwrap_or("?");
        let _ = writeln!(out, "  {name}");
        if let Some(metrics) = kernel.get("metrics").and_then(|m| m.as_object()) {
            for (k, v) in metrics {
                let _ = writeln!(out, "    {k:<62} {v}");
            }
        }
    }
}

/// A failure's message cut to what a person reads first: `pysource::traceback::shorten`'s
/// short form (the frames in the kernel's own file with their lines, the library frame that
/// raised, the exception; host paths stripped), the same text the repair prompts carry;
/// other messages up to 12 lines. The rest stays in the result's `message` and the log.
pub struct Brief {
    pub lines: Vec<String>,
    /// Lines of the message not shown.
    pub left_out: usize,
}

/// Lines of a message that is not a traceback shown in the verdict.
const PLAIN_LINES: usize = 12;

pub fn brief_message(message: &str) -> Brief {
    let short = crate::pysource::traceback::shorten(message);
    let mut lines = short.lines();
    if !short.traceback {
        lines.truncate(PLAIN_LINES);
    }
    let left_out = message
        .trim_end()
        .lines()
        .count()
        .saturating_sub(lines.len());
    Brief { lines, left_out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{OutputCheck, Timing, Trial};

    fn correct_gpu() -> EvalResult {
        EvalResult {
            correct: true,
            device: crate::protocol::DeviceInfo {
                kind: "cuda".into(),
                name: Some("NVIDIA H200".into()),
                capability: Some("9.0".into()),
                ..Default::default()
            },
            trials: vec![
                Trial {
                    kind: "random".into(),
                    passed: true,
                    outputs: vec![OutputCheck {
                        max_abs_err: Some(1e-6),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                Trial {
                    kind: "signed".into(),
                    passed: true,
                    ..Default::default()
                },
            ],
            timing: Some(Timing {
                meaningful: true,
                score: Some(1.95),
                reference: TimingStats {
                    median_ms: 3.0,
                    runs: 100,
                    cached: true,
                    ..Default::default()
                },
                kernel: TimingStats {
                    median_ms: 1.538,
                    runs: 100,
                    ..Default::default()
                },
                flush_l2_bytes: 1,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn correct_gpu_verdict_shows_score_and_cached_baseline() {
        let text = render(&correct_gpu(), None, Style::plain());
        assert!(
            text.contains("CORRECT  1/1 trials, signed-input trial"),
            "{text}"
        );
        assert!(text.contains("score      1.95x"), "{text}");
        assert!(text.contains("[cached baseline]"), "{text}");
        assert!(text.contains("NVIDIA H200"), "{text}");
        assert!(!text.contains('\x1b'));
    }

    #[test]
    fn gpu_verdict_shows_peak_memory_against_the_plan() {
        let mut r = correct_gpu();
        let gib = 1u64 << 30;
        r.memory = [
            ("startup".to_string(), gib),
            ("correctness".to_string(), 31 * gib),
        ]
        .into_iter()
        .collect();
        r.footprint = Some(crate::protocol::Footprint {
            inputs_bytes: 6 * gib,
            outputs_bytes: 6 * gib,
            planned_peak_bytes: 30 * gib + gib / 2,
            total_bytes: 79 * gib,
            ..Default::default()
        });
        let text = render(&r, None, Style::plain());
        assert!(
            text.contains(
                "memory  peak 31.0 GiB of 79.0 GiB in use (planned 30.5 GiB: inputs 6.0 GiB, outputs 6.0 GiB)"
            ),
            "{text}"
        );
        r.footprint.as_mut().unwrap().weights_bytes = gib / 2;
        assert!(
            render(&r, None, Style::plain())
                .contains("(planned 30.5 GiB: inputs 6.0 GiB, outputs 6.0 GiB, model 0.5 GiB)")
        );
        r.memory.clear();
        assert!(!render(&r, None, Style::plain()).contains("memory"));
    }

    #[test]
    fn cpu_verdict_says_timing_is_not_meaningful() {
        let mut r = correct_gpu();
        r.timing = None;
        r.device.kind = "cpu".into();
        let text = render(&r, None, Style::plain());
        assert!(text.contains("not meaningful on the CPU"), "{text}");
        assert!(!text.contains("score"), "{text}");
    }

    #[test]
    fn a_traceback_is_cut_to_the_kernels_frames_and_the_errors() {
        let message = r#"Traceback (most recent call last):
  File "/cache/pyenv/lib/python3.11/site-packages/triton/runtime/interpreter.py", line 1511, in __call__
    self.fn(**args)
  File "/dev/shm/kforge-exchange-x/eval-1/kernel.py", line 19, in relu_kernel
    y = tl.maximum(tl.tanhh(x), 0.0)  # no such function
                   ^^^^^^^^
AttributeError: module 'triton.language' has no attribute 'tanhh'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/cache/harness/kforge_harness/worker.py", line 155, in op_forward
    out = self.model(*self.inputs)
          ^^^^^^^^^^^^^^^^^^^^^^^^
  File "/dev/shm/kforge-exchange-x/eval-1/kernel.py", line 31, in forward
    relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
  File "/cache/pyenv/lib/python3.11/site-packages/triton/runtime/interpreter.py", line 1515, in __call__
    raise InterpreterError(repr(e)) from e
triton.runtime.errors.InterpreterError: AttributeError("module 'triton.language' has no attribute 'tanhh'")"#;
        let b = brief_message(message);
        assert_eq!(
            b.lines,
            [
                "Traceback (kernel.py's frames; harness and interpreter frames left out):",
                "  File \"kernel.py\", line 31, in forward",
                "      31 | relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)",
                "  File \"kernel.py\", line 19, in relu_kernel",
                "      19 | y = tl.maximum(tl.tanhh(x), 0.0)  # no such function",
                "                          ^^^^^^^^",
                "AttributeError: module 'triton.language' has no attribute 'tanhh'",
            ]
        );
        assert_eq!(b.left_out, message.lines().count() - 7);
        // Not a traceback: shown as it is, up to 12 lines.
        let plain = (1..=20)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let b = brief_message(&plain);
        assert_eq!(b.lines.len(), 12);
        assert_eq!(b.left_out, 8);
    }

    #[test]
    fn failure_shows_category_summary_and_message() {
        let r = EvalResult {
            category: Some(Category::Compile),
            summary: "Triton compile error (relu_kernel line 9): no attribute tanhh".into(),
            message: "Traceback...\nAttributeError: module has no attribute 'tanhh'".into(),
            ..Default::default()
        };
        let text = render(
            &r,
            Some(std::path::Path::new("/tmp/x.json")),
            Style::plain(),
        );
        assert!(text.starts_with("device"), "{text}");
        assert!(
            text.contains("FAILED  compile: Triton compile error"),
            "{text}"
        );
        assert!(text.contains("  AttributeError"), "{text}");
        assert!(text.contains("full result and log: /tmp/x.json"), "{text}");
    }

    #[test]
    fn a_kernel_caught_after_timing_shows_no_score() {
        let mut r = correct_gpu();
        r.correct = false;
        r.category = Some(Category::Mismatch);
        r.summary = "re-check after timing (fresh values in the timing buffers): ...".into();
        let text = render(&r, None, Style::plain());
        assert!(
            text.contains("FAILED  mismatch: re-check after timing"),
            "{text}"
        );
        assert!(
            !text.contains("score") && !text.contains("timing  median"),
            "{text}"
        );
    }

    /// A judge-window result: the method, both sides' intervals, the score's, a noisy
    /// side, the reported-time ratio and the environment.
    #[test]
    fn a_judge_window_verdict_shows_intervals_and_the_environment() {
        let mut r = correct_gpu();
        r.timing = Some(
            serde_json::from_value(serde_json::json!({
                "meaningful": true, "method": "judge_window", "flush_l2_bytes": 1,
                "reference": {"median_ms": 2.46, "ci_low_ms": 2.45, "ci_high_ms": 2.47, "runs": 120,
                              "mean_ms": 2.461, "min_ms": 2.44, "max_ms": 2.6, "std_ms": 0.01,
                              "window_median_ms": 2.76, "null_ms": 0.3, "reported_median_ms": 2.44,
                              "precision_reached": true},
                "kernel": {"median_ms": 2.0, "ci_low_ms": 1.9, "ci_high_ms": 2.2, "runs": 300,
                           "noisy": true, "precision_reached": false, "gate_timeouts": 2},
                "score": 1.23, "score_low": 1.2, "score_high": 1.26, "noisy": true,
                "interval_method": "bootstrap, 2000 resamples",
                "reported_score": 1.25,
                "environment": {"tf32_matmul": false, "tf32_cudnn": true,
                                "sm_clock_mhz": [1980, 1755], "max_sm_clock_mhz": 1980,
                                "clocks_locked": false, "driver": "580.159.04",
                                "cuda_driver": "13.0", "cuda_runtime": "13.0",
                                "torch": "2.11.0", "triton": "3.6.0"}
            }))
            .unwrap(),
        );
        let text = render(&r, None, Style::plain());
        for needle in [
            "timing  judge window: the judge's own CUDA events around each process's whole GPU work, L2 flushed before each run",
            "  reference  2.4600 ms [2.4500-2.4700]  120 runs, precision reached",
            "             mean 2.4610, min 2.4400, max 2.6000, std 0.0100; window 2.7600 less null 0.3000; reported 2.4400",
            "  kernel     2.0000 ms [1.9000-2.2000]  noisy  300 runs, precision not reached, 2 gate timeouts",
            "  score      1.23x [1.20-1.26]  noisy  (reference median / kernel median; 95% interval: bootstrap, 2000 resamples)",
            "  reported   1.25x  (the ratio of the CUDA-event medians",
            "environment\n  math       TF32 matmul off, TF32 cuDNN on\n",
            "  clocks     SM 1980 -> 1755 MHz (max 1980), not locked\n",
            "  software   driver 580.159.04, CUDA 13.0, torch 2.11.0, triton 3.6.0\n",
        ] {
            assert!(text.contains(needle), "{needle:?} in\n{text}");
        }
    }

    /// Issue 35: under `strict` a convolution's reference runs with cuDNN TF32 off; the
    /// verdict also gives the score against the reference under PyTorch's defaults, beside
    /// the headline, and says which one fast_p and selection use.
    #[test]
    fn a_verdict_shows_the_score_against_pytorchs_defaults() {
        let mut r = correct_gpu();
        r.timing = Some(
            serde_json::from_value(serde_json::json!({
                "meaningful": true, "method": "judge_window",
                "reference": {"median_ms": 9.5, "runs": 100}, "kernel": {"median_ms": 9.05, "runs": 100},
                "score": 1.05, "score_low": 1.03, "score_high": 1.07,
                "defaults": {"error": null, "differs": "float32 convolutions: TF32 cuDNN convolutions off (PyTorch's default: on)",
                             "pytorch_settings": {"matmul": false, "cudnn": true, "float32_matmul_precision": "highest"},
                             "policy_settings": {"matmul": false, "cudnn": false, "float32_matmul_precision": "highest"},
                             "median_ms": 3.9, "reference_median_ms": 9.5, "speedup_over_reference": 2.44,
                             "speedup_low": 2.41, "speedup_high": 2.47, "noisy": false, "cached": true,
                             "used_for": "u"},
                "score_vs_defaults": 0.43, "score_vs_defaults_low": 0.42, "score_vs_defaults_high": 0.44
            }))
            .unwrap(),
        );
        let text = render(&r, None, Style::plain());
        assert!(
            text.contains(
                "  vs defaults 0.43x [0.42-0.44] (float32 convolutions: TF32 cuDNN convolutions off (PyTorch's \
                 default: on): the reference runs 2.44x [2.41-2.47] as fast under them; the headline, fast_p and \
                 selection use the policy's reference)"
            ),
            "{text}"
        );
        assert_eq!(r.score(), Some(1.05), "the headline stays the policy's");
        let summary = r.timing.as_ref().unwrap().defaults_score().unwrap();
        assert_eq!(summary.score.score, Some(0.43));
        assert_eq!(
            summary.text(),
            "0.43x [0.42-0.44] vs PyTorch's defaults (the reference runs 2.44x as fast under them)"
        );
    }

    /// With the compile baseline: the compiled reference's line, both scores, and which
    /// one is the headline (what `EvalResult::score` returns); a task that does not compile
    /// says why and stays against eager.
    #[test]
    fn a_verdict_with_the_compile_baseline_shows_both_scores() {
        let mut r = correct_gpu();
        r.timing = Some(
            serde_json::from_value(serde_json::json!({
                "meaningful": true, "method": "judge_window",
                "reference": {"median_ms": 2.4, "runs": 100}, "kernel": {"median_ms": 2.0, "runs": 100},
                "score": 1.2, "score_low": 1.17, "score_high": 1.23,
                "compile": {"mode": "default", "compile_s": 21.4, "median_ms": 1.6,
                            "eager_median_ms": 2.4, "speedup_over_eager": 1.5,
                            "speedup_low": 1.48, "speedup_high": 1.52, "cached": true},
                "score_vs_compile": 0.8, "score_vs_compile_low": 0.78, "score_vs_compile_high": 0.82,
                "baseline": "compile", "baseline_reason": "baseline = best: torch.compile is 1.50x as fast as eager"
            }))
            .unwrap(),
        );
        let text = render(&r, None, Style::plain());
        for needle in [
            "  compiled   torch.compile (default) 1.6000 ms, 1.50x [1.48-1.52] eager, compiled in 21.4 s (cached)",
            "  vs eager   1.20x [1.17-1.23]",
            "  vs compile 0.80x [0.78-0.82]",
            "  headline   vs torch.compile  (baseline = best: torch.compile is 1.50x as fast as eager)",
        ] {
            assert!(text.contains(needle), "{needle:?} in\n{text}");
        }
        assert_eq!(r.score(), Some(0.8));
        assert_eq!(r.score_interval(), Some((0.78, 0.82)));
        assert_eq!(r.score_vs(crate::protocol::Baseline::Eager).0, Some(1.2));

        without_compile_figure(r.timing.as_mut().unwrap());
        let text = render(&r, None, Style::plain());
        assert!(
            text.contains("  compiled   no torch.compile baseline (default): under torch.compile the task computes another result"),
            "{text}"
        );
        assert!(!text.contains("vs compile"), "{text}");
        assert_eq!(r.score(), Some(1.2));
    }

    /// `t` as the judge leaves a task torch.compile cannot serve: the figure's error, no
    /// score against it, the headline against eager.
    fn without_compile_figure(t: &mut Timing) {
        t.compile = Some(crate::protocol::CompileFigures {
            mode: "default".into(),
            error: Some("under torch.compile the task computes another result".into()),
            ..Default::default()
        });
        (
            t.score_vs_compile,
            t.score_vs_compile_low,
            t.score_vs_compile_high,
        ) = (None, None, None);
        t.baseline = Some(crate::protocol::Baseline::Eager);
    }

    /// A verdict whose torch.compile figure is deferred says it is being measured now and
    /// scores against eager; the block printed once it came gives the figure, the score
    /// against it and the headline's baseline now.
    #[test]
    fn a_deferred_compile_figure_is_said_then_given_after_the_verdict() {
        let mut r = correct_gpu();
        r.timing = Some(
            serde_json::from_value(serde_json::json!({
                "meaningful": true, "method": "judge_window",
                "reference": {"median_ms": 2.4, "runs": 100}, "kernel": {"median_ms": 2.0, "runs": 100},
                "score": 1.2, "score_low": 1.17, "score_high": 1.23,
                "compile": null, "compile_deferred": "pending", "baseline": "eager",
                "baseline_reason": "baseline = best, scored against eager until torch.compile's figure, measured after this verdict, is in"
            }))
            .unwrap(),
        );
        let text = render(&r, None, Style::plain());
        for needle in [
            "  compiled   torch.compile is not cached yet for this task and device: the score against it is being measured now, after this verdict",
            "  vs eager   1.20x [1.17-1.23]",
            "  headline   vs eager  (baseline = best, scored against eager until torch.compile's figure",
        ] {
            assert!(text.contains(needle), "{needle:?} in\n{text}");
        }
        assert!(!text.contains("vs compile"), "{text}");

        let t = r.timing.as_mut().unwrap();
        t.compile = Some(crate::protocol::CompileFigures {
            mode: "default".into(),
            compile_s: Some(14.2),
            median_ms: Some(1.6),
            speedup_over_eager: Some(1.5),
            speedup_low: Some(1.48),
            speedup_high: Some(1.52),
            ..Default::default()
        });
        (
            t.score_vs_compile,
            t.score_vs_compile_low,
            t.score_vs_compile_high,
        ) = (Some(0.8), Some(0.78), Some(0.82));
        t.baseline = Some(crate::protocol::Baseline::Compile);
        t.baseline_reason = Some("baseline = best: torch.compile is 1.50x as fast as eager".into());
        t.compile_deferred = Some(CompileDeferral::AfterVerdict);
        let block = render_compile_after_verdict(t, Style::plain());
        assert_eq!(
            block,
            "torch.compile, measured after the verdict (now cached for this task and device):\n\
             \x20 compiled   torch.compile (default) 1.6000 ms, 1.50x [1.48-1.52] eager, compiled in 14.2 s\n\
             \x20 vs compile 0.80x [0.78-0.82]  (compiled reference median / kernel median: the score vs eager x compiled / eager)\n\
             \x20 headline   now vs torch.compile 0.80x [0.78-0.82]  (baseline = best: torch.compile is 1.50x as fast as eager)\n"
        );
        // A task torch.compile cannot serve: why, and the headline stays against eager.
        without_compile_figure(t);
        t.baseline_reason = Some("baseline = best, scored against eager: under torch.compile the task computes another result".into());
        let block = render_compile_after_verdict(t, Style::plain());
        assert!(
            block.contains("  compiled   no torch.compile baseline (default): under torch.compile"),
            "{block}"
        );
        assert!(block.contains("  headline   now vs eager 1.20x [1.17-1.23]  (baseline = best, scored against eager"), "{block}");
        assert!(!block.contains("vs compile"), "{block}");
    }

    /// A result from before intervals reads as before: no brackets, no environment.
    #[test]
    fn an_old_result_shows_no_interval() {
        let text = render(&correct_gpu(), None, Style::plain());
        assert!(
            text.contains("timing  CUDA events, L2 flushed before each run"),
            "{text}"
        );
        assert!(
            text.contains("  kernel     1.5380 ms  100 runs\n"),
            "{text}"
        );
        assert!(
            text.contains("  score      1.95x  (reference median / kernel median)"),
            "{text}"
        );
        assert!(!text.contains("x ["), "{text}");
        assert!(!text.contains("environment"), "{text}");
    }

    #[test]
    fn colours_only_when_asked() {
        let text = render(&correct_gpu(), None, Style { color: true });
        assert!(text.contains("\x1b[1;32mCORRECT"));
    }

    fn tf32_record(policy: &str, reduced: bool) -> serde_json::Value {
        serde_json::json!({
            "policy": policy,
            "task_dtypes": ["float32"],
            "tolerance": {"float32": [1e-4, 1e-4]},
            "kernel_math": [{"category": "tf32_dot", "line": 23, "where": "kernel gemm", "lowers": true,
                             "dynamic": false,
                             "text": "tl.dot at line 23 of gemm computes in TF32 on float32 operands (without input_precision)"}],
            "reduced": if reduced { vec!["tf32_dot"] } else { vec![] },
            "statement": if reduced {
                "the kernel computes in lower precision than the task's float32: tl.dot at line 23 of gemm computes in TF32 on float32 operands (without input_precision)"
            } else { "the kernel's GEMMs compute in TF32" },
            "reference_settings": {"matmul": false, "cudnn": false, "float32_matmul_precision": "highest"},
            "kernel_settings": {"matmul": false, "cudnn": false, "float32_matmul_precision": "highest"}
        })
    }

    #[test]
    fn the_precision_line_names_policy_tolerance_math_and_reference_settings() {
        let mut r = correct_gpu();
        r.precision = Some(serde_json::from_value(tf32_record("tf32", false)).unwrap());
        r.tolerance = Some(
            serde_json::from_value(serde_json::json!({
                "mode": "dtype", "atol": null, "rtol": null, "effective_atol": {"out": 1e-2},
                "outputs": {"out": {"dtype": "float32", "atol": 1e-2, "rtol": 1e-2}}
            }))
            .unwrap(),
        );
        let text = render(&r, None, Style::plain());
        assert!(
            text.contains("(float32 atol=rtol 1e-2; tolerance dtype)"),
            "the tolerance per dtype: {text}"
        );
        assert!(
            text.contains(
                "precision tf32 (float32 atol=rtol 1e-4); the kernel's GEMMs compute in TF32\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "  reference: TF32 matmul off, TF32 cuDNN off, float32 matmul precision highest\n"
            ),
            "{text}"
        );

        let mut failed = EvalResult {
            category: Some(Category::Mismatch),
            summary: "trial 1: out: 9 of 10 elements outside tolerance".into(),
            ..Default::default()
        };
        failed.precision = Some(serde_json::from_value(tf32_record("strict", true)).unwrap());
        let text = render(&failed, None, Style::plain());
        assert!(
            text.contains("precision strict (float32 atol=rtol 1e-4); the kernel computes in lower precision than the task's float32: tl.dot at line 23"),
            "{text}"
        );
        // Explicit tolerances and a non-default mode are said as such.
        let mut explicit = correct_gpu();
        explicit.tolerance = Some(
            serde_json::from_value(serde_json::json!({
                "mode": "kernelbench", "atol": 0.01, "rtol": 0.01, "effective_atol": {}, "outputs": {}
            }))
            .unwrap(),
        );
        let text = render(&explicit, None, Style::plain());
        assert!(
            text.contains("(atol 1e-2, rtol 1e-2; tolerance kernelbench)"),
            "{text}"
        );
    }

    /// Issue 35: under the `oracle` rule the verdict says each output's error as a multiple
    /// of the honest error, against its limit, and why an output fell back to `dtype`.
    #[test]
    fn the_oracle_rule_shows_each_outputs_margin_and_fallbacks() {
        let mut r = correct_gpu();
        r.tolerance = Some(
            serde_json::from_value(serde_json::json!({
                "mode": "oracle", "atol": null, "rtol": null, "effective_atol": {},
                "outputs": {
                    "out[0]": {"dtype": "float32", "rule": "oracle", "limit": 128.0, "error_ratio": 4.62,
                               "honest_rms": 1.9e-5, "oracle": "float64 oracle"},
                    "out[1]": {"dtype": "float64", "rule": "dtype", "atol": 1e-9, "rtol": 1e-9,
                               "fallback": "a float64 output: there is no wider oracle"}},
                "oracle": {"kind": "float64", "rule": "r", "factor": {"float32": 128.0}}
            }))
            .unwrap(),
        );
        let mut precision: PrecisionRecord =
            serde_json::from_value(tf32_record("strict", false)).unwrap();
        precision.rule = Some("oracle".into());
        precision.factor = [("float32".to_string(), 128.0)].into();
        r.precision = Some(precision);
        let text = render(&r, None, Style::plain());
        assert!(
            text.contains(
                "out[0] float32: error 4.62x the honest error (limit 128x; float64 oracle)"
            ),
            "{text}"
        );
        assert!(text.contains("float64 atol=rtol 1e-9"), "{text}");
        assert!(
            text.contains("no float64 oracle (out[1]: a float64 output: there is no wider oracle): the dtype rule"),
            "{text}"
        );
        assert!(!text.contains("tolerance oracle"), "{text}");
        assert!(
            text.contains(
                "precision strict (float32 within 128x the honest error, float64 oracle)"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_verdict_shows_the_speed_of_light() {
        let mut r = correct_gpu();
        r.speed_of_light = Some(
            serde_json::from_value(serde_json::json!({
                "bound_ms": 0.5, "limit": "memory", "reference_pct": 16.7, "kernel_pct": 32.6
            }))
            .unwrap(),
        );
        let text = render(&r, None, Style::plain());
        assert!(
            text.contains("\nspeed of light 0.5000 ms (memory-bound): the reference at 17%, this kernel at 33%\n"),
            "{text}"
        );
    }
}
