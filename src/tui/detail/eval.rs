//! The Eval tab: the verdict, score and timings, trials, static checks, the error, the
//! profile and the phases of the selected candidate's evaluation.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{ScrollView, TabView};
use crate::protocol::Baseline;
use crate::protocol::Timing;
use crate::protocol::{figures, timing_text};
use crate::session::state::{CandidateStatus, indistinguishable};
use crate::tui::component::Ctx;
use crate::tui::theme::Role;
use crate::tui::widgets::{glyph, kv, section, truncate, wrap};

#[derive(Debug, Default)]
pub struct EvalTab;

impl TabView for EvalTab {
    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect, view: &mut ScrollView) {
        view.draw_lines(cx, frame, area, eval_doc(cx, area.width as usize));
    }
}

fn eval_doc(cx: &Ctx, width: usize) -> Vec<Line<'static>> {
    let Some(c) = cx.selected_candidate() else {
        return vec![];
    };
    let mut lines = Vec::new();
    let Some(summary) = c.eval.clone() else {
        let text = match c.status {
            CandidateStatus::Evaluating => {
                format!("evaluating… {}", c.phase.clone().unwrap_or_default())
            }
            CandidateStatus::Dropped => {
                format!("dropped: {}", c.dropped_reason.clone().unwrap_or_default())
            }
            _ => "not evaluated yet".into(),
        };
        return vec![Line::styled(text, cx.theme.get(Role::Muted))];
    };
    let (g, role) = glyph(cx, c);
    let verdict = if summary.correct {
        "correct".to_string()
    } else {
        format!("failed: {}", summary.category.map_or("?", |c| c.as_str()))
    };
    lines.push(Line::from(vec![
        Span::styled(format!("{:<12}", "verdict"), cx.theme.get(Role::Muted)),
        Span::styled(format!("{g} {verdict}"), cx.theme.get(role)),
    ]));
    if !summary.summary.is_empty() {
        lines.push(kv(cx, "summary", summary.summary.clone()));
    }
    let ms = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.4} ms"));
    let score = match (summary.score, c.score_interval()) {
        (Some(s), Some((low, high))) => format!("{s:.3}x [{low:.3}-{high:.3}]"),
        (Some(s), None) => format!("{s:.3}x"),
        (None, _) => "–".into(),
    };
    let noisy = if summary.score.is_some() && summary.noisy {
        "  noisy"
    } else {
        ""
    };
    lines.push(kv(
        cx,
        "score",
        format!(
            "{score}{noisy}   kernel {}   reference {}",
            ms(summary.kernel_ms),
            ms(summary.reference_ms)
        ),
    ));
    // Both baselines, where the reference was timed under torch.compile too: the headline
    // above is the one marked.
    if let Some(b) = &summary.baselines {
        let mark = |baseline| {
            if b.headline == baseline {
                " (headline)"
            } else {
                ""
            }
        };
        let compile = b
            .compile_speedup
            .map(|s| format!("   (torch.compile {s:.2}x eager)"))
            .unwrap_or_default();
        let text = format!(
            "vs eager {}{}   vs compile {}{}{compile}",
            b.vs_eager.text(),
            mark(Baseline::Eager),
            b.vs_compile.text(),
            mark(Baseline::Compile),
        );
        lines.extend(kv_wrapped(cx, "baselines", &text, width, Role::Text));
    }
    // Against what the person's PyTorch runs by default, where the policy's settings differ.
    if let Some(d) = &summary.vs_defaults {
        lines.push(kv(cx, "defaults", d.text()));
    }
    // Whether the measurements can tell this candidate from the best at all.
    if let Some(best) = cx
        .state
        .best
        .filter(|b| *b != c.id)
        .and_then(|b| cx.state.candidates.get(&b))
        && indistinguishable(best, c)
    {
        lines.push(Line::styled(
            format!(
                "≈ indistinguishable from the best, #{} {}: the 95% intervals overlap",
                best.id,
                best.speedup().map(|s| s.text()).unwrap_or_default()
            ),
            cx.theme.get(Role::Warn),
        ));
    }
    for f in &summary.flags {
        lines.push(Line::styled(
            format!("{} flag: {f}", crate::tui::glyphs::Glyph::Warning.text()),
            cx.theme.get(Role::Warn),
        ));
    }
    if let Some(s) = &c.shapes {
        let role = if s.fails() { Role::Fail } else { Role::Text };
        lines.extend(kv_wrapped(cx, "shapes", &s.line, width, role));
    }
    let result = c.eval_file.as_deref().and_then(|f| cx.docs.eval(f));
    let Some(r) = result else {
        if c.eval_file.as_deref().is_some_and(|f| cx.docs.loading(f)) {
            lines.push(Line::styled(
                "(loading the full result…)",
                cx.theme.get(Role::Muted),
            ));
        }
        for w in &summary.warnings {
            lines.push(Line::styled(format!("! {w}"), cx.theme.get(Role::Warn)));
        }
        return lines;
    };
    if let Some(name) = &r.device.name {
        lines.push(kv(
            cx,
            "device",
            format!(
                "{name}{}",
                r.versions
                    .torch
                    .as_ref()
                    .map(|t| format!("   torch {t}"))
                    .unwrap_or_default()
            ),
        ));
    }
    if let Some(p) = &r.precision {
        // The policy with its tolerances, then what the kernel computes in (a warning when
        // below what the policy accepts).
        let mut text = p.headline();
        if !p.statement.is_empty() {
            text.push_str("; ");
            text.push_str(&p.statement);
        }
        let role = if p.is_reduced() {
            Role::Warn
        } else {
            Role::Text
        };
        lines.extend(kv_wrapped(cx, "precision", &text, width, role));
    }
    if let Some(sol) = &r.speed_of_light {
        let role = if sol.beyond_light() {
            Role::Warn
        } else {
            Role::Text
        };
        lines.extend(kv_wrapped(cx, "SoL", &sol.describe(), width, role));
    }
    if !r.trials.is_empty() {
        lines.push(section(cx, "trials"));
        for t in &r.trials {
            let (g, role) = if t.passed {
                ("✓", Role::Ok)
            } else {
                ("✗", Role::Fail)
            };
            let detail = t
                .outputs
                .iter()
                .map(|o| {
                    let err = match (o.max_abs_err, o.max_rel_err) {
                        (Some(a), Some(r)) => format!(" abs {a:.1e} rel {r:.1e}"),
                        _ => String::new(),
                    };
                    // The oracle rule's margin: the error over the honest error, its limit.
                    let margin = match (o.error_ratio, o.limit) {
                        (Some(ratio), Some(limit)) => {
                            format!(" {}x/{limit}x", crate::protocol::ratio_text(ratio))
                        }
                        _ => String::new(),
                    };
                    format!(
                        "{}{}{}{}",
                        o.output,
                        err,
                        margin,
                        o.reason
                            .as_ref()
                            .map(|r| format!(" ({r})"))
                            .unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            lines.push(Line::from(vec![
                Span::styled(format!("{g} "), cx.theme.get(role)),
                Span::styled(
                    format!("{} {}  ", t.kind, t.index),
                    cx.theme.get(Role::Muted),
                ),
                Span::raw(truncate(&detail, width.saturating_sub(16))),
            ]));
        }
    }
    if let Some(t) = &r.timing {
        timing_lines(cx, t, width, &mut lines);
    }
    if !r.static_report.warnings.is_empty() || !r.static_report.errors.is_empty() {
        lines.push(section(cx, "static checks"));
        for (f, role) in r
            .static_report
            .errors
            .iter()
            .map(|f| (f, Role::Fail))
            .chain(r.static_report.warnings.iter().map(|f| (f, Role::Warn)))
        {
            lines.push(Line::styled(
                format!(
                    "{}: {}{}",
                    f.rule,
                    f.message,
                    f.line.map(|l| format!(" (line {l})")).unwrap_or_default()
                ),
                cx.theme.get(role),
            ));
        }
    }
    if !r.message.trim().is_empty() {
        lines.push(section(cx, "error"));
        lines.extend(
            wrap(&r.message, width)
                .into_iter()
                .map(|l| Line::styled(l, cx.theme.get(Role::Fail))),
        );
    }
    if let Some(serde_json::Value::Object(p)) = &r.profile {
        lines.push(section(cx, "profile"));
        for (k, v) in p {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            lines.push(Line::from(vec![
                Span::styled(format!("{k:<28}"), cx.theme.get(Role::Muted)),
                Span::raw(v),
            ]));
        }
    }
    if !r.phases_s.is_empty() {
        lines.push(section(cx, "phases (s)"));
        lines.push(Line::styled(
            r.phases_s
                .iter()
                .map(|(k, v)| format!("{k} {v:.2}"))
                .collect::<Vec<_>>()
                .join("   "),
            cx.theme.get(Role::Muted),
        ));
    }
    lines
}

/// The timing section: the method, each side's figures and interval, the score with its
/// interval, the reported-time ratio, then the environment that shaped them.
fn timing_lines(cx: &Ctx, t: &Timing, width: usize, lines: &mut Vec<Line<'static>>) {
    let kv = |key: &str, value: String, role: Role| kv_wrapped(cx, key, &value, width, role);
    lines.push(section(
        cx,
        if t.meaningful {
            "timing (ms)"
        } else {
            "timing (not meaningful)"
        },
    ));
    if t.method.is_some() {
        lines.extend(kv(
            "method",
            timing_text::method_text(t.method.as_deref(), t.forwards_per_window),
            Role::Text,
        ));
    }
    lines.push(Line::styled(
        format!(
            "{:<11}{:>9}{:>9}{:>9}{:>9}{:>9}{:>6}",
            "", "median", "mean", "min", "max", "std", "runs"
        ),
        cx.theme.get(Role::Muted),
    ));
    let sides = [("reference", &t.reference), ("kernel", &t.kernel)];
    for (name, s) in sides {
        lines.push(Line::from(format!(
            "{:<11}{:>9.4}{:>9.4}{:>9.4}{:>9.4}{:>9.4}{:>6}{}",
            name,
            s.median_ms,
            s.mean_ms,
            s.min_ms,
            s.max_ms,
            s.std_ms,
            s.runs,
            if s.cached { " (cached)" } else { "" }
        )));
    }
    for (name, s) in sides {
        let Some((low, high)) = s.interval() else {
            continue;
        };
        let mut parts = vec![format!("median in [{low:.4}-{high:.4}]")];
        if s.noisy {
            parts.push("noisy".into());
        }
        match s.precision_reached {
            Some(true) => parts.push("precision reached".into()),
            Some(false) => parts.push("precision not reached".into()),
            None => {}
        }
        if s.gate_timeouts > 0 {
            parts.push(format!("{} gate timeouts", s.gate_timeouts));
        }
        if let (Some(w), Some(n)) = (s.window_median_ms, s.null_ms) {
            parts.push(format!("window {w:.4} less null {n:.4}"));
        }
        if let Some(r) = s.reported_median_ms {
            parts.push(format!("reported {r:.4}"));
        }
        let role = if s.noisy { Role::Warn } else { Role::Text };
        lines.extend(kv(name, parts.join(", "), role));
    }
    // The score itself is at the top; here its interval, where there is one.
    if let (Some(score), Some(interval)) = (t.score, t.score_interval()) {
        let mut text = figures::score_with_interval(score, Some(interval));
        if t.noisy {
            text.push_str("  noisy");
        }
        if let Some(m) = &t.interval_method {
            text.push_str(&format!("  (95% interval: {m})"));
        }
        let label = if t.compile.is_some() {
            "vs eager"
        } else {
            "score"
        };
        lines.extend(kv(label, text, Role::Text));
    }
    if let Some(compile) = &t.compile {
        let role = if compile.error.is_some() {
            Role::Warn
        } else {
            Role::Text
        };
        lines.extend(kv("compiled", compile.describe(), role));
    }
    if let Some(score) = t.score_vs_compile {
        lines.extend(kv(
            "vs compile",
            figures::score_with_interval(score, t.score_vs_compile_interval()),
            Role::Text,
        ));
    }
    if let Some(line) = t.defaults_line() {
        let role = if t.defaults.as_ref().is_some_and(|d| d.error.is_some()) {
            Role::Warn
        } else {
            Role::Text
        };
        lines.extend(kv("vs defaults", line, role));
    }
    if let Some(reason) = &t.baseline_reason {
        lines.extend(kv(
            "headline",
            format!("{} ({reason})", t.headline_baseline().label()),
            Role::Text,
        ));
    }
    if let Some(reported) = t.reported_score {
        lines.extend(kv(
            "reported",
            format!("{reported:.2}x (the processes' own CUDA-event medians: information only)"),
            Role::Text,
        ));
    }
    if let Some(env) = &t.environment {
        let env = timing_text::environment_lines(env);
        if !env.is_empty() {
            lines.push(section(cx, "environment"));
            for (k, v) in env {
                lines.extend(kv(k, v, Role::Text));
            }
        }
    }
}

/// A key and its value, the value word-wrapped under itself to `width` (as `kv` lays out
/// one line).
fn kv_wrapped(cx: &Ctx, key: &str, value: &str, width: usize, role: Role) -> Vec<Line<'static>> {
    wrap(value, width.saturating_sub(KEY_WIDTH))
        .into_iter()
        .enumerate()
        .map(|(i, text)| {
            let key = if i == 0 { key } else { "" };
            Line::from(vec![
                Span::styled(format!("{key:<KEY_WIDTH$}"), cx.theme.get(Role::Muted)),
                Span::styled(text, cx.theme.get(role)),
            ])
        })
        .collect()
}

/// The key column of `kv`.
const KEY_WIDTH: usize = 12;
