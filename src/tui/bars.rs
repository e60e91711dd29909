//! The three lines under the panes: the activity line (what the engine does now), the
//! status bar (task, model, state, tokens, cost, time, best) and the key hints (or the
//! message of the last key).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::protocol::EngineState;
use crate::session::state::CandidateStatus;

use super::component::{Ctx, Hint, Look};
use super::glyphs::Glyph;
use super::keymap::Action;
use super::steering::kinds_text;
use super::theme::Role;
use super::widgets::{call_label, fmt_tokens, parts_line};
use crate::protocol::figures::duration_text;

/// The run's elapsed time (`2m33s`, as every duration): to now while it runs, to its last
/// event once it ended.
pub fn elapsed_text(cx: &Ctx) -> String {
    let Some(start) = cx.state.started else {
        return "elapsed -".into();
    };
    let end = if cx.state.state.is_over() || cx.options.read_only {
        cx.state.last_ts.unwrap_or(start)
    } else {
        cx.now()
    };
    let secs = (end - start).num_milliseconds() as f64 / 1000.0;
    format!("elapsed {}", duration_text(secs))
}

/// The mode, always: `review mode`.
pub fn mode_text(cx: &Ctx) -> String {
    format!("{} mode", cx.state.mode.word())
}

/// The approvals given for the rest of the session, and the key that takes them back:
/// `approved always: LLM calls (u takes back)`; `None` when there is none.
pub fn standing_text(cx: &Ctx) -> Option<String> {
    if cx.state.standing.is_empty() {
        return None;
    }
    let key = cx.keymap.hint(Action::Revoke);
    let back = if key.is_empty() || !cx.can_act() {
        String::new()
    } else {
        format!(" ({key} takes back)")
    };
    Some(format!(
        "approved always: {}{back}",
        kinds_text(&cx.state.standing)
    ))
}

/// What the engine is doing now, for the activity line: each LLM call in flight (step,
/// model, elapsed, waiting for its first token or streaming), each evaluation and its
/// phase, the unseen-shapes re-check, the gates waiting for the person. Empty when nothing
/// runs.
pub fn activity(cx: &Ctx) -> Vec<(String, Role)> {
    let now = cx.now();
    let s = &cx.state;
    // What the run waits for the person to do comes first (their calls, the gates), then
    // what runs by itself: a long line is cut at its end.
    let mut yours: Vec<(String, Role)> = Vec::new();
    let mut items: Vec<(String, Role)> = Vec::new();
    for call in s.calls_in_flight() {
        let secs = (now - call.started).num_seconds().max(0);
        let step = call_label(call);
        let elapsed = duration_text(secs as f64);
        if call.answered_by_person() {
            // The person is the model: the run waits for them, not for a provider.
            yours.push((
                format!(
                    "call {} {step} ({}) {elapsed}, waiting for your answer ({} writes it, or write {})",
                    call.id,
                    call.model,
                    cx.keymap.hint(Action::AnswerCall),
                    crate::protocol::manual::answer_file(call.id)
                ),
                Role::Running,
            ));
            continue;
        }
        let progress = if call.live_text.is_empty() && call.live_reasoning.is_empty() {
            "waiting for the first token".to_string()
        } else {
            let chars = call.live_text.chars().count() + call.live_reasoning.chars().count();
            format!("streaming ~{} tokens", chars / 4)
        };
        // The model is the status bar's.
        items.push((
            format!("call {} {step} {elapsed}, {progress}", call.id),
            Role::Running,
        ));
    }
    let waiting = s.waiting_gates().len();
    if waiting > 0 && !s.state.is_over() {
        yours.push((
            format!(
                "{waiting} gate{} waiting for you ({} opens the oldest)",
                if waiting == 1 { "" } else { "s" },
                cx.keymap.hint(Action::OpenGate)
            ),
            Role::Warn,
        ));
    }
    for c in s
        .candidates
        .values()
        .filter(|c| c.status == CandidateStatus::Evaluating)
    {
        let phase = c.phase.as_deref().unwrap_or("starting");
        items.push((format!("evaluating #{}: {phase}", c.id), Role::Running));
    }
    // The unseen-shapes re-check takes a minute or more: not idle.
    if let Some((id, since)) = s.shapes_checking {
        let secs = (now - since).num_milliseconds() as f64 / 1000.0;
        items.push((
            format!(
                "checking #{id} on unseen shapes and seeds ({})",
                duration_text(secs)
            ),
            Role::Running,
        ));
    }
    yours.extend(items);
    yours
}

pub fn draw_activity(cx: &Ctx, frame: &mut Frame, area: Rect) {
    let items = activity(cx);
    let line = if items.is_empty() {
        let idle = match cx.state.state {
            EngineState::Paused => "paused: no new step starts",
            s if s.is_over() => "nothing running",
            _ => "idle",
        };
        Line::styled(format!(" {idle}"), cx.theme.get(Role::Muted))
    } else {
        let mut spans = vec![Span::raw(" ")];
        for (i, (text, role)) in items.into_iter().enumerate() {
            if i > 0 {
                spans.push(Span::styled(" · ", cx.theme.get(Role::Muted)));
            }
            spans.push(Span::styled(text, cx.theme.get(role)));
        }
        Line::from(spans)
    };
    frame.render_widget(Paragraph::new(line), area);
}

pub fn draw_status(cx: &Ctx, frame: &mut Frame, area: Rect) {
    let s = &cx.state;
    let (task, pm) = s.info.as_ref().map_or(("?".into(), "?".into()), |i| {
        (i.task.clone(), format!("{}/{}", i.provider, i.model))
    });
    let (glyph, role) = match s.state {
        EngineState::Starting => (None, Role::Pending),
        EngineState::Running => (Some(Glyph::Running), Role::Running),
        EngineState::Paused => (Some(Glyph::Paused), Role::Warn),
        EngineState::Waiting => (Some(Glyph::Waiting), Role::Warn),
        EngineState::Finished => (Some(Glyph::Correct), Role::Ok),
        EngineState::Failed => (Some(Glyph::Failed), Role::Fail),
        EngineState::Stopped => (Some(Glyph::Stopped), Role::Warn),
    };
    let word = match s.state {
        EngineState::Waiting => "waiting for you",
        other => other.word(),
    };
    let state_text = match glyph {
        Some(g) => format!("{} {word}", g.text()),
        None => word.to_string(),
    };
    // Gates waiting say so whatever the engine's last state change was (seeds run
    // concurrently: one gate's answer does not mean nothing else waits).
    let waiting = s.waiting_gates().len();
    let (state_text, role) = if waiting > 0 && !s.state.is_over() && s.state != EngineState::Paused
    {
        (
            format!("{} {waiting} waiting for you", Glyph::Waiting.text()),
            Role::Warn,
        )
    } else {
        (state_text, role)
    };
    let usage = s.total_usage();
    let cost = s.total_cost().map_or("$?".into(), |c| format!("${c:.3}"));
    let best = s
        .best
        .and_then(|b| s.candidates.get(&b))
        .map(|c| {
            format!(
                "best #{} {}",
                c.id,
                c.score().map(|x| format!("{x:.2}x")).unwrap_or_default()
            )
        })
        .unwrap_or_else(|| "no best yet".into());
    // (priority, text, role): the lowest priorities go first when the line is too long.
    let mut parts: Vec<(u8, String, Role)> = vec![
        (9, format!(" {task}"), Role::Title),
        (4, pm, Role::Status),
        (10, state_text, role),
        // The mode is never left out: it says which gates stop the run.
        (10, mode_text(cx), Role::Accent),
        (
            5,
            format!(
                "tok {} in {} out",
                fmt_tokens(usage.input),
                fmt_tokens(usage.output)
            ),
            Role::Status,
        ),
        (7, cost, Role::Status),
        (6, elapsed_text(cx), Role::Status),
        (8, best, Role::Best),
    ];
    if let Some(standing) = standing_text(cx) {
        // Above the figures: it changes which gates the run asks.
        parts.insert(4, (9, standing, Role::Warn));
    }
    // Whether keys act on the run says what the rest of the screen means: kept over the
    // figures.
    if cx.options.read_only {
        parts.push((7, "read-only".into(), Role::Muted));
    } else if cx.attached_to_ended_run() {
        parts.push((9, "read-only: the run ended".into(), Role::Warn));
    } else if cx.options.attached {
        parts.push((7, "attached".into(), Role::Muted));
    }
    frame.render_widget(Paragraph::new(parts_line(cx, parts, area.width)), area);
}

/// The key hints of whatever has the keyboard, or the message of the last key.
pub fn draw_hints(
    cx: &impl Look,
    frame: &mut Frame,
    area: Rect,
    flash: Option<&str>,
    hints: &[Hint],
) {
    let theme = cx.theme();
    if let Some(msg) = flash {
        frame.render_widget(
            Paragraph::new(Line::styled(format!(" {msg}"), theme.get(Role::Warn))),
            area,
        );
        return;
    }
    let mut spans = vec![Span::raw(" ")];
    for hint in hints {
        let key = cx.keymap().hint(hint.action);
        if key.is_empty() {
            continue;
        }
        spans.push(Span::styled(key, theme.get(Role::StatusKey)));
        spans.push(Span::styled(
            format!(" {}  ", hint.label),
            theme.get(Role::Muted),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}
