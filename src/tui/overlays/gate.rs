//! The gate dialog: one waiting gate, opened by the person (`a`), never by itself. It
//! shows exactly what approving does (the prompt to send, the kernel to evaluate or its
//! diff against its parent), answers with its own keys, asks before rejecting, and says
//! where it stands in the queue of waiting gates.

use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{ChoiceView, ConfirmKind, ConfirmView, InputView, Overlay};
use crate::protocol::{CandidateId, Command, Decision, GateId, GateKind};
use crate::session::state::Gate;
use crate::tui::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint};
use crate::tui::diff::{self, Diff, RowKind};
use crate::tui::editor::TextBuf;
use crate::tui::highlight::hash_text;
use crate::tui::keymap::{Action, Context, scrolled};
use crate::tui::shared::EditPurpose;
use crate::tui::theme::Role;
use crate::tui::widgets::{
    centered, code_lines, dialog, diff_sign, outcome, seg_spans, wrap, wrap_line,
};

/// Whether "approve all of this kind for the session" means anything: not for the final
/// gate, asked once per session.
fn approvable_always(kind: GateKind) -> bool {
    kind != GateKind::FinalBest
}

#[derive(Debug, Clone)]
pub struct GateView {
    pub gate: GateId,
    scroll: usize,
    /// An evaluation gate shows the kernel's diff against its parent instead of the kernel.
    diff: bool,
    diff_cache: Option<((u64, u64), Arc<Diff>)>,
}

impl GateView {
    pub fn new(gate: GateId) -> GateView {
        GateView {
            gate,
            scroll: 0,
            diff: false,
            diff_cache: None,
        }
    }

    /// The gate, while it still waits.
    pub fn waiting<'a>(&self, cx: &'a Ctx) -> Option<&'a Gate> {
        cx.state.gates.get(&self.gate).filter(|g| g.is_waiting())
    }

    /// The parent of the gate's candidate (what an evaluation gate's diff is against).
    fn parent(gate: &Gate, cx: &Ctx) -> Option<CandidateId> {
        gate.candidate
            .and_then(|c| cx.state.candidates.get(&c))
            .and_then(|c| c.parent)
    }

    /// What approving sends or evaluates: the gate's file, else the candidate's code.
    fn shown_file(gate: &Gate, cx: &Ctx) -> Option<String> {
        gate.file.clone().or_else(|| {
            gate.candidate
                .and_then(|c| cx.state.candidates.get(&c))
                .map(|c| c.file.clone())
        })
    }

    fn rewrite(&self, gate: &Gate, inline: bool, cx: &Ctx, out: &mut AppEvents) {
        let Some(file) = gate.file.as_deref() else {
            return;
        };
        let Some(text) = cx.docs.text_now(file) else {
            out.flash(format!("{file} cannot be read"));
            return;
        };
        let text = text.to_string();
        let python = file.ends_with(".py");
        let suffix = if python { ".py" } else { ".md" };
        let purpose = EditPurpose::GateRewrite(gate.id);
        if inline {
            let mut view = InputView::new(
                format!("rewrite ({}) — ctrl-s sends, esc cancels", gate.question),
                purpose,
                TextBuf::at_start(&text),
                true,
            );
            if python {
                view = view.python();
            }
            out.push(AppEvent::Open(Overlay::Input(view)));
        } else {
            out.push(AppEvent::Edit {
                text,
                suffix,
                purpose,
            });
        }
    }

    /// What approving sends or evaluates, wrapped to `width` (nothing is cut).
    fn preview(&mut self, gate: &Gate, cx: &Ctx, width: usize) -> Vec<Line<'static>> {
        let (lines, indent) = self.preview_lines(gate, cx);
        lines
            .into_iter()
            .flat_map(|l| wrap_line(l, width, indent))
            .collect()
    }

    /// The preview's lines, and how far their continuation rows are indented (under the
    /// line numbers, or a diff's sign).
    fn preview_lines(&mut self, gate: &Gate, cx: &Ctx) -> (Vec<Line<'static>>, usize) {
        let Some(file) = Self::shown_file(gate, cx) else {
            return (Vec::new(), 0);
        };
        let parent = Self::parent(gate, cx);
        let Some(text) = cx.docs.text(&file) else {
            let what = if cx.docs.loading(&file) {
                "loading…"
            } else {
                "not there"
            };
            return (
                vec![Line::styled(
                    format!("── {file} ({what}) ──"),
                    cx.theme.get(Role::Muted),
                )],
                0,
            );
        };
        if let Some(parent) = parent.filter(|_| gate.kind == GateKind::Evaluation && self.diff) {
            let old = cx.code(parent).unwrap_or_else(|| Arc::from(""));
            let key = (hash_text(&old), hash_text(&text));
            let d = match &self.diff_cache {
                Some((k, d)) if *k == key => d.clone(),
                _ => {
                    let d = Arc::new(diff::diff(&old, &text, 3));
                    self.diff_cache = Some((key, d.clone()));
                    d
                }
            };
            let mut lines = vec![Line::styled(
                format!(
                    "── {file} against its parent #{parent}: +{} −{} ({} shows the kernel) ──",
                    d.added,
                    d.removed,
                    cx.keymap.hint(Action::GateDiff)
                ),
                cx.theme.get(Role::Accent),
            )];
            if d.is_empty() {
                lines.push(Line::styled(
                    "identical to its parent",
                    cx.theme.get(Role::Muted),
                ));
            }
            // The Diff tab's rows (colours, word emphasis), without its line numbers.
            lines.extend(d.unified.iter().map(|r| {
                let mut spans = Vec::new();
                if r.kind != RowKind::Hunk {
                    let (sign, style) = diff_sign(cx, r.kind);
                    spans.push(Span::styled(sign, style));
                }
                spans.extend(seg_spans(cx, &r.text, r.kind, 0));
                Line::from(spans)
            }));
            return (lines, 1);
        }
        let what = match gate.kind {
            GateKind::LlmCall => "what is sent",
            GateKind::Evaluation => "what is evaluated",
            _ => "the candidate's code",
        };
        let toggle = if gate.kind == GateKind::Evaluation && parent.is_some() {
            format!(
                ", {} shows the diff against its parent",
                cx.keymap.hint(Action::GateDiff)
            )
        } else {
            String::new()
        };
        // Before a kernel becomes the session's result: the evidence, then its code.
        let mut lines = match gate.candidate.and_then(|c| cx.state.candidates.get(&c)) {
            Some(c) if gate.kind == GateKind::FinalBest => {
                let mut evidence = super::evidence_lines(cx, c);
                evidence.push(Line::from(""));
                evidence
            }
            _ => Vec::new(),
        };
        lines.push(Line::styled(
            format!("── {file} ({what}{toggle}) ──"),
            cx.theme.get(Role::Accent),
        ));
        // A kernel in its syntax colours; a prompt as it is written.
        let body: Arc<Vec<Line<'static>>> = if file.ends_with(".py") {
            code_lines(cx, &text)
        } else {
            Arc::new(
                text.lines()
                    .map(|l| Line::styled(l.replace('\t', "    "), cx.theme.get(Role::Text)))
                    .collect(),
            )
        };
        let digits = body.len().max(1).to_string().len();
        lines.extend(body.iter().enumerate().map(|(i, l)| {
            let mut spans = vec![Span::styled(
                format!("{:>digits$} ", i + 1),
                cx.theme.get(Role::Muted),
            )];
            spans.extend(l.spans.iter().cloned());
            Line::from(spans)
        }));
        (lines, digits + 1)
    }
}

impl Component for GateView {
    fn context(&self) -> Option<Context> {
        Some(Context::Gate)
    }

    fn hints(&self, cx: &Ctx, out: &mut Vec<Hint>) {
        out.push(Hint::new(Action::Approve, "approve"));
        if self.waiting(cx).is_some_and(|g| approvable_always(g.kind)) {
            out.push(Hint::new(Action::ApproveAlways, "approve all of this kind"));
        }
        out.push(Hint::new(Action::Reject, "reject"));
        if self.waiting(cx).is_some_and(|g| g.rewritable()) {
            out.extend([
                Hint::new(Action::Rewrite, "rewrite"),
                Hint::new(Action::RewriteInline, "inline"),
            ]);
        }
        out.extend([
            Hint::new(Action::SwitchMode, "mode"),
            Hint::new(Action::Down, "scroll"),
            Hint::new(Action::Later, "close"),
        ]);
    }

    /// The gate's own keys, and the scroll keys for its preview; nothing else reaches the
    /// panes behind it.
    fn on_key(
        &mut self,
        key: &crossterm::event::KeyEvent,
        cx: &Ctx,
        out: &mut AppEvents,
    ) -> Handled {
        if let Some(action) = cx.keymap.lookup(key, &[Context::Gate, Context::Global]) {
            let _ = self.on_action(action, cx, out);
        }
        Handled::Consumed
    }

    fn on_action(&mut self, action: Action, cx: &Ctx, out: &mut AppEvents) -> Handled {
        let Some(gate) = self.waiting(cx) else {
            return Handled::Ignored;
        };
        match action {
            Action::Approve => out.push(AppEvent::Resolve {
                gate: gate.id,
                decision: Decision::Approve,
            }),
            // Asked once per session: there is no "all of them" to approve.
            Action::ApproveAlways if !approvable_always(gate.kind) => out.flash(format!(
                "this gate is asked once per session: {} approves it",
                cx.keymap.hint(Action::Approve)
            )),
            Action::ApproveAlways => {
                out.push(AppEvent::Send {
                    command: Command::ApproveAlways { kind: gate.kind },
                    done: format!(
                        "all {} approved for this session ({} takes it back)",
                        gate.kind.plural(),
                        cx.keymap.hint(Action::Revoke)
                    ),
                });
                out.push(AppEvent::CloseGate);
            }
            // The list of modes, over the dialog: a switch that would answer this gate
            // asks first.
            Action::SwitchMode => out.push(AppEvent::Open(Overlay::Choice(ChoiceView::mode(cx)))),
            Action::Revoke if cx.state.standing.is_empty() => {
                out.flash("no approval to take back")
            }
            Action::Revoke => out.push(AppEvent::Open(Overlay::Choice(ChoiceView::revoke()))),
            Action::Reject => out.push(AppEvent::Open(Overlay::Confirm(ConfirmView::new(
                ConfirmKind::RejectGate(gate.id),
            )))),
            // Stage, algorithm and final-best gates have nothing to rewrite.
            Action::Rewrite | Action::RewriteInline if !gate.rewritable() => {
                out.flash("this gate has nothing to rewrite: approve or reject");
            }
            Action::Rewrite | Action::RewriteInline => {
                self.rewrite(gate, action == Action::RewriteInline, cx, out)
            }
            Action::GateDiff if gate.kind != GateKind::Evaluation => out.flash(format!(
                "{} shows a kernel's diff against its parent at an evaluation gate; this gate is {}",
                cx.keymap.hint(Action::GateDiff),
                gate.kind.describe()
            )),
            Action::GateDiff if Self::parent(gate, cx).is_none() => out.flash(format!(
                "#{} has no parent to diff against",
                gate.candidate.map_or("?".into(), |c| c.to_string())
            )),
            Action::GateDiff => {
                self.diff = !self.diff;
                self.scroll = 0;
            }
            Action::Later => {
                out.push(AppEvent::CloseGate);
                out.flash(format!(
                    "gate {} keeps waiting: {} opens it again",
                    gate.id,
                    cx.keymap.hint(Action::OpenGate)
                ));
            }
            other => match scrolled(other, self.scroll, 20) {
                Some(s) => self.scroll = s,
                None => return Handled::Ignored,
            },
        }
        Handled::Consumed
    }

    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect) {
        let Some(gate) = self.waiting(cx) else {
            return;
        };
        let waiting = cx.state.waiting_gates();
        let at = waiting.iter().position(|g| g.id == gate.id).unwrap_or(0) + 1;
        let r = centered(
            area,
            area.width.saturating_sub(8).max(60),
            area.height.saturating_sub(4).max(12),
        );
        frame.render_widget(Clear, r);
        let block = dialog(
            cx,
            format!(
                " Waiting for you — gate {} ({at} of {} waiting, oldest first) ",
                gate.id,
                waiting.len(),
            ),
        );
        let inner = block.inner(r);
        frame.render_widget(block, r);
        let w = inner.width as usize;
        // Every line the person reads wraps: the question, the gate's kind and candidate,
        // what it sends, the buttons.
        let mut head: Vec<Line> = wrap(&gate.question, w)
            .into_iter()
            .map(|l| Line::styled(l, cx.theme.get(Role::Title)))
            .collect();
        let candidate = gate
            .candidate
            .and_then(|c| cx.state.candidates.get(&c))
            .map(|c| {
                format!(
                    ", candidate #{} {} — {}",
                    c.id,
                    c.kind.label(),
                    outcome(cx, c)
                )
            })
            .unwrap_or_default();
        head.extend(
            wrap(&format!("{}{candidate}", gate.kind.describe()), w)
                .into_iter()
                .map(|l| Line::styled(l, cx.theme.get(Role::Muted))),
        );
        // Why it is asked, and where that is changed: the mode (`M`), not a button here.
        head.extend(
            wrap(
                &format!(
                    "Asked because the run is in {} mode ({} changes the mode).",
                    cx.state.mode.word(),
                    cx.keymap.hint(Action::SwitchMode)
                ),
                w,
            )
            .into_iter()
            .map(|l| Line::styled(l, cx.theme.get(Role::Muted))),
        );
        let always = format!("approve all {} this session   ", gate.kind.plural());
        let button = |a: Action, label: &str, role: Role| {
            [
                Span::styled(
                    format!("[{}] ", cx.keymap.hint(a)),
                    cx.theme.get(Role::StatusKey),
                ),
                Span::styled(label.to_string(), cx.theme.get(role)),
            ]
        };
        let mut buttons = vec![button(Action::Approve, "approve   ", Role::Ok)];
        if approvable_always(gate.kind) {
            buttons.push(button(Action::ApproveAlways, &always, Role::Ok));
        }
        buttons.push(button(Action::Reject, "reject…   ", Role::Fail));
        if gate.rewritable() {
            buttons.push(button(Action::Rewrite, "rewrite in $EDITOR   ", Role::Text));
            buttons.push(button(Action::RewriteInline, "inline   ", Role::Text));
        }
        buttons.push(button(
            Action::Later,
            "close (it keeps waiting)",
            Role::Muted,
        ));
        // The buttons on as many rows as they need, never cut between a key and its label.
        let mut foot: Vec<Vec<Span>> = vec![Vec::new()];
        let mut used = 0;
        for b in buttons {
            let len: usize = b.iter().map(|s| s.content.chars().count()).sum();
            if used > 0 && used + len > w {
                foot.push(Vec::new());
                used = 0;
            }
            used += len;
            foot.last_mut().expect("a row").extend(b);
        }
        let foot: Vec<Line> = foot.into_iter().map(Line::from).collect();
        let gate = gate.clone();
        let preview = self.preview(&gate, cx, w);
        let body_h = (inner.height as usize).saturating_sub(head.len() + foot.len() + 1);
        self.scroll = self.scroll.min(preview.len().saturating_sub(body_h));
        let mut lines = head;
        lines.extend(preview.into_iter().skip(self.scroll).take(body_h));
        let used = lines.len();
        lines.extend(
            (used..(inner.height as usize).saturating_sub(foot.len())).map(|_| Line::from("")),
        );
        lines.extend(foot);
        frame.render_widget(Paragraph::new(lines), inner);
    }
}
