//! Confirmations: quitting while something runs, marking final, rejecting a gate.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph};

use super::{ConfirmKind, ConfirmView};
use crate::protocol::{Command, Decision, GateKind};
use crate::tui::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint};
use crate::tui::keymap::{Action, Context};
use crate::tui::shared::TuiExit;
use crate::tui::widgets::{centered, dialog, wrap};

impl ConfirmView {
    /// Title and text (the last line names the keys).
    fn text(&self, cx: &Ctx, actions_in_flight: usize) -> (&'static str, String) {
        match &self.kind {
            ConfirmKind::Quit if cx.options.attached => (
                " Detach? ",
                "The run goes on in its own process; kforge open attaches again.\n[y] detach   [s] stop the run and detach   [n] stay".to_string(),
            ),
            ConfirmKind::Quit if cx.state.state.is_over() => (
                " Quit while your actions run? ",
                format!(
                    "{actions_in_flight} of your actions (LLM calls, evaluations) are still running: quitting cancels them.\n[y] quit   [n] stay"
                ),
            ),
            ConfirmKind::Quit => (
                " Quit while the run is active? ",
                "The engine stops cleanly; the session stays resumable.\n[y] quit   [n] stay"
                    .to_string(),
            ),
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

impl Component for ConfirmView {
    fn context(&self) -> Option<Context> {
        Some(Context::Confirm)
    }

    fn hints(&self, cx: &Ctx, out: &mut Vec<Hint>) {
        out.extend([Hint::new(Action::Yes, "yes"), Hint::new(Action::No, "no")]);
        if self.kind == ConfirmKind::Quit && cx.options.attached {
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
                    ConfirmKind::Quit => out.push(AppEvent::Quit(cx.quit_exit())),
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
            Action::StopRun if self.kind == ConfirmKind::Quit && cx.options.attached => {
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

    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect) {
        let (title, text) = self.text(cx, cx.actions_in_flight());
        let r = centered(area, 64, 6);
        frame.render_widget(Clear, r);
        let block = dialog(cx, title);
        let inner = block.inner(r);
        frame.render_widget(block, r);
        let lines: Vec<Line> = text
            .lines()
            .flat_map(|l| wrap(l, inner.width as usize))
            .map(Line::from)
            .collect();
        frame.render_widget(Paragraph::new(lines), inner);
    }
}
