//! The batch view's texts: the two header lines (the batch, its counts, the figures over
//! all tasks), the selected task's line under the table, and each cell. Pure functions of
//! the context.

use ratatui::text::Line;

use crate::batch::results::{TaskResult, TaskStatus, cost_text, elapsed_seconds, task_seconds};
use crate::protocol::RunEnd;
use crate::protocol::figures::duration_text;

use super::BatchCtx;
use crate::tui::glyphs::Glyph;
use crate::tui::theme::Role;
use crate::tui::widgets::{fmt_tokens, parts_line, truncate};

/// The role a status word is drawn in.
pub fn status_role(status: TaskStatus) -> Role {
    match status {
        TaskStatus::Waiting => Role::Pending,
        TaskStatus::Running => Role::Running,
        TaskStatus::AwaitingYou { .. } => Role::Warn,
        TaskStatus::Refused | TaskStatus::Interrupted => Role::Warn,
        TaskStatus::Ended(RunEnd::Complete) => Role::Ok,
        TaskStatus::Ended(RunEnd::Stopped | RunEnd::BudgetReached) => Role::Warn,
        TaskStatus::Ended(
            RunEnd::NoCorrectKernel | RunEnd::Failed | RunEnd::NoAnswer | RunEnd::NothingEvaluated,
        ) => Role::Fail,
    }
}

/// The best speedup cell and its role: `1.52x`, `correct` (not timed), `-`.
pub fn speedup_cell(r: &TaskResult) -> (String, Role) {
    let role = if r.correct { Role::Ok } else { Role::Muted };
    (r.speedup_text(), role)
}

/// A row's cost: `$0.0123`, `≥$0.0123` when some calls' cost is unknown (a lower bound).
pub fn cost_cell(r: &TaskResult) -> String {
    if r.unpriced_calls > 0 {
        format!("{}${:.4}", Glyph::AtLeast.text(), r.cost_usd)
    } else {
        format!("${:.4}", r.cost_usd)
    }
}

/// Whether a task has a session to open.
pub fn has_session(r: &TaskResult) -> bool {
    !matches!(r.status, TaskStatus::Waiting | TaskStatus::Refused)
}

/// The first header line: the batch, who answers, where its tasks stand.
pub fn header(cx: &BatchCtx, width: u16) -> Line<'static> {
    let m = &cx.manifest;
    let mut parts = vec![
        (9, format!(" {}", cx.name), Role::Title),
        (5, format!("{}/{}", m.provider, m.model), Role::Status),
    ];
    // The number of tasks is the table's title.
    match &cx.all {
        Some((_, counts)) => parts.push((10, counts.text(), Role::Status)),
        None => parts.push((10, "reading the tasks …".into(), Role::Muted)),
    }
    if let Some(e) = &cx.error {
        parts.push((11, format!("cannot read the batch: {e}"), Role::Fail));
    }
    parts_line(cx, parts, width)
}

/// The second header line: the figures over all tasks.
pub fn figures(cx: &BatchCtx, width: u16) -> Line<'static> {
    let Some((all, _)) = &cx.all else {
        return Line::styled(" reading every task's session …", cx.theme.get(Role::Muted));
    };
    let pct = |rate: f64| format!("{:.0}%", rate * 100.0);
    let fast_1 = all
        .fast_p
        .as_ref()
        .and_then(|f| f.iter().find(|f| f.p == 1.0))
        .map_or("fast_1 n/a".into(), |f| match f.confident_rate {
            Some(confident) => format!(
                "fast_1 {}/{} ({}, confident {})",
                f.count,
                all.tasks,
                pct(f.rate),
                pct(confident)
            ),
            None => format!("fast_1 {}/{} ({})", f.count, all.tasks, pct(f.rate)),
        });
    let geomean = all
        .geomean_speedup
        .map_or("geomean n/a".into(), |g| format!("geomean {g:.2}x"));
    let mut parts = vec![
        (
            10,
            format!(
                " correct {}/{} ({})",
                all.correct,
                all.tasks,
                pct(all.correctness_rate)
            ),
            Role::Ok,
        ),
        (9, fast_1, Role::Status),
        (8, geomean, Role::Best),
        (5, format!("tok {}", fmt_tokens(all.tokens)), Role::Status),
        (7, cost_text(all.cost_usd, all.unpriced_calls), Role::Status),
    ];
    // How long the batch has run, and (labelled apart) its tasks' times added up: tasks
    // run side by side, so the second is the larger.
    let results = cx.results.as_deref().unwrap_or_default();
    parts.push((
        6,
        format!(
            "elapsed {}",
            duration_text(elapsed_seconds(results, cx.now))
        ),
        Role::Status,
    ));
    parts.push((
        4,
        format!("task-time {}", duration_text(task_seconds(results, cx.now))),
        Role::Muted,
    ));
    parts_line(cx, parts, width)
}

/// The selected task under the table: where its session is and its best kernel, or why
/// it has none.
pub fn selected_line(cx: &BatchCtx, i: usize, width: u16) -> Line<'static> {
    let muted = cx.theme.get(Role::Muted);
    let Some(task) = cx.manifest.tasks.get(i) else {
        return Line::default();
    };
    let Some(r) = cx.result(i) else {
        return Line::styled(format!(" {}: reading …", task.key), muted);
    };
    let mut parts = vec![task.session().display().to_string()];
    if task.name != task.key.as_str() {
        parts.push(task.name.clone());
    }
    let (text, role) = match r.status {
        TaskStatus::Waiting => {
            parts.push("waiting: no session yet".into());
            (parts.join(" · "), Role::Muted)
        }
        TaskStatus::Refused => {
            let why = r.refused.as_deref().unwrap_or("no reason recorded");
            (format!("refused by the task check: {why}"), Role::Warn)
        }
        _ => {
            match (&r.best, &r.best_file) {
                (Some(id), Some(file)) => parts.push(format!("best #{id} {}", file.display())),
                _ => parts.push("no correct kernel yet".into()),
            }
            if let (true, Some(score), Some(interval)) = (r.correct, r.score, r.score_interval()) {
                parts.push(crate::protocol::figures::score_with_interval(
                    score,
                    Some(interval),
                ));
            }
            if let (Some(k), Some(refm)) = (r.kernel_ms, r.reference_ms) {
                parts.push(format!("{k:.3} ms (reference {refm:.3} ms)"));
            }
            parts.push(format!(
                "{} call{}",
                r.calls,
                if r.calls == 1 { "" } else { "s" }
            ));
            (parts.join(" · "), Role::Muted)
        }
    };
    let text = truncate(&format!(" {text}"), width as usize);
    Line::styled(text, cx.theme.get(role))
}
