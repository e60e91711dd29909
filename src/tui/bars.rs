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
use super::theme::Role;
use super::widgets::{fmt_tokens, parts_line};

/// The run's elapsed time: to now while it runs, to its last event once it ended.
pub fn elapsed_text(cx: &Ctx) -> String {
    let Some(start) = cx.state.started else {
        return "--:--:--".into();
    };
    let end = if cx.state.state.is_over() || cx.options.read_only {
        cx.state.last_ts.unwrap_or(start)
    } else {
        cx.now()
    };
    let secs = (end - start).num_seconds().max(0);
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

/// What the engine is doing now, for the activity line: each LLM call in flight (step,
/// model, elapsed, waiting for its first token or streaming), each evaluation and its
/// phase, the gates waiting for the person. Empty when nothing runs.
pub fn activity(cx: &Ctx) -> Vec<(String, Role)> {
    let now = cx.now();
    let s = &cx.state;
    let mut items: Vec<(String, Role)> = Vec::new();
    for call in s.calls_in_flight() {
        let secs = (now - call.started).num_seconds().max(0);
        let progress = if call.answered_by_person() {
            // The person is the model: the run waits for them, not for a provider.
            format!(
                "waiting for your answer ({} writes it, or write {})",
                cx.keymap.hint(Action::AnswerCall),
                crate::protocol::manual::answer_file(call.id)
            )
        } else if call.live_text.is_empty() && call.live_reasoning.is_empty() {
            "waiting for the first token".to_string()
        } else {
            let chars = call.live_text.chars().count() + call.live_reasoning.chars().count();
            format!("streaming ~{} tokens", chars / 4)
        };
        let step = if call.key.is_empty() {
            call.kind.word().to_string()
        } else {
            call.key.clone()
        };
        items.push((
            format!(
                "call {} {step} ({}) {secs}s, {progress}",
                call.id, call.model
            ),
            Role::Running,
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
    let waiting = s.waiting_gates().len();
    if waiting > 0 && !s.state.is_over() {
        items.push((
            format!(
                "{waiting} gate{} waiting for you ({} opens the oldest)",
                if waiting == 1 { "" } else { "s" },
                cx.keymap.hint(Action::OpenGate)
            ),
            Role::Warn,
        ));
    }
    items
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
    let (state_text, role) = match s.state {
        EngineState::Starting => ("starting", Role::Pending),
        EngineState::Running => ("● running", Role::Running),
        EngineState::Paused => ("‖ paused", Role::Warn),
        EngineState::Waiting => ("⚑ waiting for you", Role::Warn),
        EngineState::Finished => ("✓ finished", Role::Ok),
        EngineState::Failed => ("✗ failed", Role::Fail),
        EngineState::Stopped => ("■ stopped", Role::Warn),
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
        (state_text.to_string(), role)
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
    if cx.options.read_only {
        parts.push((3, "read-only".into(), Role::Muted));
    } else if cx.attached_to_ended_run() {
        parts.push((9, "read-only: the run ended".into(), Role::Warn));
    } else if cx.options.attached {
        parts.push((3, "attached".into(), Role::Muted));
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
