//! Confirmations: quitting while something runs, marking final, rejecting a gate,
//! cancelling every call, a mode switch that approves waiting gates.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph};

use super::{ConfirmKind, ConfirmView};
use crate::protocol::{Command, Decision, GateKind, Mode};
use crate::tui::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint};
use crate::tui::keymap::{Action, Context};
use crate::tui::shared::TuiExit;
use crate::tui::widgets::{centered, dialog, wrap};

impl ConfirmView {
    /// Title and text (the last line names the keys).
    fn text(&self, cx: &Ctx, actions_in_flight: usize) -> (&'static str, String) {
        // Quitting a session opened from the batch view goes back to it.
        let leave = if cx.options.in_batch {
            "back to the batch"
        } else {
            "quit"
        };
        match &self.kind {
            ConfirmKind::Quit { .. } if cx.options.attached => (
                " Detach? ",
                "The run goes on in its own process; kforge open attaches again.\n[y] detach   [s] stop the run and detach   [n] stay".to_string(),
            ),
            ConfirmKind::Quit { .. } if cx.state.state.is_over() => (
                " Quit while your actions run? ",
                format!(
                    "{actions_in_flight} of your actions (LLM calls, evaluations) are still running: quitting cancels them.\n[y] {leave}   [n] stay"
                ),
            ),
            ConfirmKind::Quit { interrupt } => (
                " Quit while the run is active? ",
                format!(
                    "The engine stops cleanly; the session stays resumable{}.\n[y] {leave}   [n] stay",
                    if *interrupt { " (exit code 130, as Ctrl-C)" } else { "" }
                ),
            ),
            ConfirmKind::SwitchMode(mode) => (" Switch mode? ", switch_text(cx, *mode)),
            ConfirmKind::CancelAllCalls(n) => (
                " Cancel every call? ",
                format!(
                    "Cancel all {n} LLM calls in flight? Their steps give up; {} asks a failed call again.\n[y] cancel them   [n] no",
                    cx.keymap.hint(Action::Reask)
                ),
            ),
            ConfirmKind::MarkFinal(id) => (
                " Mark final? ",
                format!("Make #{id} the final answer of this session?\n[y] yes   [n] no"),
            ),
            ConfirmKind::RejectGate(gate) => {
                let what = cx
                    .state
                    .gates
                    .get(gate)
                    .map(|g| match (g.kind, g.candidate) {
                        (GateKind::Evaluation, Some(c)) => {
                            format!("Drop candidate #{c} without evaluating it?")
                        }
                        (GateKind::LlmCall, _) => "Skip this LLM call (its step gives up)?".into(),
                        (GateKind::AlgorithmOptimization, Some(c)) => {
                            format!("Skip the analysis and optimization of #{c}?")
                        }
                        (GateKind::Stages, _) => "Skip the tuning stages?".into(),
                        (GateKind::FinalBest, _) => "Declare no final kernel?".into(),
                        _ => "Reject this step?".into(),
                    })
                    .unwrap_or_else(|| "Reject this step?".into());
                (
                    " Reject? ",
                    format!("{what}\n[y] reject   [n] back to the gate"),
                )
            }
        }
    }
}

/// `Text` from `text`, for a sentence's start.
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// What a switch to `mode` does to the gates waiting now, and the keys.
fn switch_text(cx: &Ctx, mode: Mode) -> String {
    let approves = cx.gates_a_switch_approves(mode);
    let gates: Vec<String> = approves.iter().map(|g| g.id.to_string()).collect();
    let what = match approves.len() {
        0 => "No gate waiting now is approved by it.".to_string(),
        1 => format!("It approves the 1 gate waiting now (gate {}).", gates[0]),
        n => format!(
            "It approves the {n} gates waiting now (gates {}).",
            gates.join(", ")
        ),
    };
    format!(
        "Switch from {} to {} mode? {what} {}\n[y] switch{}   [n] stay in {} mode",
        cx.state.mode.word(),
        mode.word(),
        capitalized(&crate::tui::steering::asks_text(mode)),
        if approves.is_empty() {
            ""
        } else {
            " and approve them"
        },
        cx.state.mode.word()
    )
}

impl Component for ConfirmView {
    fn context(&self) -> Option<Context> {
        Some(Context::Confirm)
    }

    fn hints(&self, cx: &Ctx, out: &mut Vec<Hint>) {
        out.extend([Hint::new(Action::Yes, "yes"), Hint::new(Action::No, "no")]);
        if matches!(self.kind, ConfirmKind::Quit { .. }) && cx.options.attached {
            out.push(Hint::new(Action::StopRun, "stop the run"));
        }
    }

    fn on_key(
        &mut self,
        key: &crossterm::event::KeyEvent,
        cx: &Ctx,
        out: &mut AppEvents,
    ) -> Handled {
        // Only its own keys: a stray key neither answers nor closes it.
        match cx.keymap.lookup(key, &[Context::Confirm]) {
            Some(action) => self.on_action(action, cx, out),
            None => Handled::Consumed,
        }
    }

    fn on_action(&mut self, action: Action, cx: &Ctx, out: &mut AppEvents) -> Handled {
        match action {
            Action::Yes => {
                out.push(AppEvent::Close);
                match &self.kind {
                    ConfirmKind::Quit { interrupt } => {
                        out.push(AppEvent::Quit(cx.quit_exit(*interrupt)))
                    }
                    ConfirmKind::SwitchMode(mode) => out.push(AppEvent::Send {
                        command: Command::SetMode { mode: *mode },
                        done: format!("switching to {} mode", mode.word()),
                    }),
                    ConfirmKind::MarkFinal(id) => out.push(AppEvent::Send {
                        command: Command::MarkFinal { candidate: *id },
                        done: format!("#{id} marked final"),
                    }),
                    ConfirmKind::CancelAllCalls(_) => out.push(AppEvent::Send {
                        command: Command::CancelCall { call: None },
                        done: "cancelling every call in flight".into(),
                    }),
                    ConfirmKind::RejectGate(gate) => out.push(AppEvent::Resolve {
                        gate: *gate,
                        decision: Decision::Reject,
                    }),
                }
            }
            Action::StopRun
                if matches!(self.kind, ConfirmKind::Quit { .. }) && cx.options.attached =>
            {
                out.push(AppEvent::Close);
                out.push(AppEvent::Send {
                    command: Command::Stop,
                    done: String::new(),
                });
                out.push(AppEvent::Quit(TuiExit::StoppedAndLeft));
            }
            Action::No => out.push(AppEvent::Close),
            _ => {}
        }
        Handled::Consumed
    }

    /// As tall as its text wrapped at words needs (nothing is cut), at most the screen.
    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect) {
        let (title, text) = self.text(cx, cx.actions_in_flight());
        let width = area.width.saturating_sub(4).min(64);
        let lines: Vec<Line> = text
            .lines()
            .flat_map(|l| wrap(l, width.saturating_sub(2) as usize))
            .map(Line::from)
            .collect();
        let r = centered(area, width, lines.len() as u16 + 2);
        frame.render_widget(Clear, r);
        let block = dialog(cx, title);
        let inner = block.inner(r);
        frame.render_widget(block, r);
        frame.render_widget(Paragraph::new(lines), inner);
    }
}
