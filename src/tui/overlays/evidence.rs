//! The final-best gate's evidence: what a person needs before accepting a kernel as the
//! session's result, in one view above its code (issue 25): its score against eager
//! PyTorch and against torch.compile with their intervals, whether the measurements can
//! tell it from the runner-up, whether it is right on unseen shapes, how far it is from
//! the speed of light, the precision it was held to, its flags and the audit's line. Reads the candidate's summary from the session and its full result from the
//! TUI's document cache (loaded off the UI thread: "loading" until it is there).

use ratatui::text::{Line, Span};

use crate::protocol::Baseline;
use crate::session::state::{Candidate, best_of, indistinguishable};
use crate::tui::component::Ctx;
use crate::tui::theme::Role;

const KEY: usize = 12;

fn row(cx: &Ctx, key: &str, value: String, role: Role) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{key:<KEY$}"), cx.theme.get(Role::Muted)),
        Span::styled(value, cx.theme.get(role)),
    ])
}

/// The evidence rows for candidate `c`, under a heading.
pub fn evidence_lines(cx: &Ctx, c: &Candidate) -> Vec<Line<'static>> {
    let mut lines = vec![Line::styled(
        format!("── evidence for #{} ──", c.id),
        cx.theme.get(Role::Accent),
    )];
    let Some(summary) = c.eval.as_ref() else {
        lines.push(row(cx, "verdict", "not evaluated".into(), Role::Warn));
        return lines;
    };
    let timed = cx.state.info.as_ref().is_some_and(|i| i.timing_meaningful);
    match (&summary.baselines, summary.score) {
        (Some(b), _) => {
            let mark = |baseline| {
                if b.headline == baseline {
                    " (headline)"
                } else {
                    ""
                }
            };
            lines.push(row(
                cx,
                "vs eager",
                format!("{}{}", b.vs_eager.text(), mark(Baseline::Eager)),
                Role::Text,
            ));
            let compile = b
                .compile_speedup
                .map(|s| format!("   torch.compile runs {s:.2}x as fast as eager"))
                .unwrap_or_default();
            lines.push(row(
                cx,
                "vs compile",
                format!(
                    "{}{}{compile}",
                    b.vs_compile.text(),
                    mark(Baseline::Compile)
                ),
                Role::Text,
            ));
        }
        (None, Some(score)) => lines.push(row(
            cx,
            "vs eager",
            format!(
                "{}   (no torch.compile baseline was measured)",
                crate::protocol::figures::score_with_interval(score, c.score_interval())
            ),
            Role::Text,
        )),
        (None, None) if timed => {
            lines.push(row(cx, "score", "not measured".into(), Role::Warn));
        }
        (None, None) => lines.push(row(
            cx,
            "score",
            "not timed (the CPU interpreter checks correctness only)".into(),
            Role::Muted,
        )),
    }
    if summary.noisy && summary.score.is_some() {
        lines.push(row(
            cx,
            "noise",
            "the timing stayed noisy: a median's 95% interval is wider than ±5%".into(),
            Role::Warn,
        ));
    }
    let runner_up = best_of(cx.state.candidates.values().filter(|o| o.id != c.id));
    if let Some(other) = runner_up.filter(|o| indistinguishable(c, o)) {
        lines.push(row(
            cx,
            "runner-up",
            format!(
                "#{} {} cannot be told apart from it: the 95% intervals overlap",
                other.id,
                other.speedup().map(|s| s.text()).unwrap_or_default()
            ),
            Role::Warn,
        ));
    }
    match &c.shapes {
        Some(shapes) => {
            let role = if shapes.fails() { Role::Fail } else { Role::Ok };
            lines.push(row(cx, "shapes", shapes.line.clone(), role));
        }
        None => lines.push(row(
            cx,
            "shapes",
            "not checked on unseen shapes yet".into(),
            Role::Muted,
        )),
    }
    let flags = if summary.flags.is_empty() {
        row(cx, "flags", "none".into(), Role::Ok)
    } else {
        row(cx, "flags", summary.flags.join(", "), Role::Warn)
    };
    lines.push(flags);
    let result = c.eval_file.as_deref().and_then(|f| cx.docs.eval(f));
    let Some(r) = result else {
        let loading = c.eval_file.as_deref().is_some_and(|f| cx.docs.loading(f));
        lines.push(row(
            cx,
            "result",
            if loading {
                "loading the full result…".into()
            } else {
                "the full result is not there".into()
            },
            Role::Muted,
        ));
        return lines;
    };
    if let Some(sol) = &r.speed_of_light {
        let role = if sol.faster_than_light {
            Role::Warn
        } else {
            Role::Text
        };
        // The word the Eval tab and the tree use (`40%SoL`).
        lines.push(row(cx, "SoL", sol.describe(), role));
    }
    if let Some(p) = &r.precision {
        let role = if p.is_reduced() {
            Role::Warn
        } else {
            Role::Text
        };
        lines.push(row(cx, "precision", p.headline(), role));
    }
    if let Some(a) = &r.audit {
        let role = if a.verdict == "ok" {
            Role::Text
        } else {
            Role::Warn
        };
        lines.push(row(
            cx,
            "audit",
            format!("{}: {}", a.verdict, a.summary),
            role,
        ));
    }
    if let Some(t) = r.timing.as_ref().filter(|t| t.meaningful)
        && let Some(compile) = &t.compile
    {
        let role = if compile.error.is_some() {
            Role::Warn
        } else {
            Role::Muted
        };
        lines.push(row(cx, "compiled", compile.describe(), role));
    }
    lines
}
