//! The Eval tab: the verdict, score and timings, trials, static checks, the error, the
//! profile and the phases of the selected candidate's evaluation.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{ScrollView, TabView};
use crate::session::state::CandidateStatus;
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
    lines.push(kv(
        cx,
        "score",
        format!(
            "{}   kernel {}   reference {}",
            summary.score.map_or("–".into(), |s| format!("{s:.3}x")),
            ms(summary.kernel_ms),
            ms(summary.reference_ms)
        ),
    ));
    for f in &summary.flags {
        lines.push(Line::styled(format!("⚑ {f}"), cx.theme.get(Role::Warn)));
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
                    format!(
                        "{}{}{}",
                        o.output,
                        err,
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
        lines.push(section(
            cx,
            if t.meaningful {
                "timing (ms)"
            } else {
                "timing (not meaningful)"
            },
        ));
        lines.push(Line::styled(
            format!(
                "{:<11}{:>9}{:>9}{:>9}{:>9}{:>9}{:>6}",
                "", "median", "mean", "min", "max", "std", "runs"
            ),
            cx.theme.get(Role::Muted),
        ));
        for (name, s) in [("reference", &t.reference), ("kernel", &t.kernel)] {
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
