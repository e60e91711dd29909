//! A list of choices over the panes: the mode to switch to (`M`) and the standing approval
//! to take back (`u`). Each choice says what it does now (the gates a switch would approve,
//! whether a kind taken back is asked again); what it offers is read from the session when
//! drawn and when chosen, so another window's answer never leaves it stale. A switch that
//! approves waiting gates asks once more, naming how many.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{ChoiceKind, ChoiceView, ConfirmKind, ConfirmView, Overlay};
use crate::protocol::{Command, GateKind, Mode};
use crate::tui::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint};
use crate::tui::keymap::{Action, Context, scrolled};
use crate::tui::steering::{after_revoke, asks, kinds_text};
use crate::tui::theme::Role;
use crate::tui::widgets::{centered, dialog, wrap};

/// One line of the list: its name, what choosing it does now, and what it asks of the app.
struct Choice {
    label: String,
    detail: String,
    role: Role,
    then: Vec<AppEvent>,
}

const MODES: [Mode; 3] = [Mode::Step, Mode::Review, Mode::Auto];

impl ChoiceView {
    /// The mode dialog, on the mode the run is in (enter there changes nothing).
    pub fn mode(cx: &Ctx) -> ChoiceView {
        let at = MODES.iter().position(|m| *m == cx.state.mode).unwrap_or(0);
        ChoiceView::new(ChoiceKind::Mode, at)
    }

    /// The dialog that takes back standing approvals.
    pub fn revoke() -> ChoiceView {
        ChoiceView::new(ChoiceKind::Revoke, 0)
    }

    fn title(&self, cx: &Ctx) -> String {
        match self.kind {
            ChoiceKind::Mode => format!(" Mode — now {} ", cx.state.mode.word()),
            ChoiceKind::Revoke => " Take back an approval ".into(),
        }
    }

    fn intro(&self, cx: &Ctx) -> String {
        match self.kind {
            ChoiceKind::Mode => format!(
                "Which gates stop the run for you. Approvals you gave with {}: {}.",
                cx.keymap.hint(Action::ApproveAlways),
                if cx.state.standing.is_empty() {
                    "none".to_string()
                } else {
                    kinds_text(&cx.state.standing)
                }
            ),
            ChoiceKind::Revoke => format!(
                "Approvals you gave with {} hold for the rest of the session. Taking one back approves nothing.",
                cx.keymap.hint(Action::ApproveAlways),
            ),
        }
    }

    fn choices(&self, cx: &Ctx) -> Vec<Choice> {
        match self.kind {
            ChoiceKind::Mode => MODES.iter().map(|m| mode_choice(cx, *m)).collect(),
            ChoiceKind::Revoke => revoke_choices(cx),
        }
    }
}

fn mode_choice(cx: &Ctx, mode: Mode) -> Choice {
    let now = cx.state.mode;
    let approves = cx.gates_a_switch_approves(mode).len();
    let mut detail = format!("{}.", asks(mode));
    if mode != now && approves > 0 {
        detail.push_str(&format!(
            " Approves the {approves} gate{} waiting now (asks you first).",
            if approves == 1 { "" } else { "s" }
        ));
    }
    if mode == Mode::Step && mode != now && !cx.state.standing.is_empty() {
        detail.push_str(&format!(
            " Ends your approvals of {}.",
            kinds_text(&cx.state.standing)
        ));
    }
    let then = if mode == now {
        vec![
            AppEvent::Close,
            AppEvent::Flash(format!("already in {} mode", mode.word())),
        ]
    } else if approves > 0 {
        vec![
            AppEvent::Close,
            AppEvent::Open(Overlay::Confirm(ConfirmView::new(ConfirmKind::SwitchMode(
                mode,
            )))),
        ]
    } else {
        vec![
            AppEvent::Close,
            AppEvent::Send {
                command: Command::SetMode { mode },
                done: format!("switching to {} mode (was {})", mode.word(), now.word()),
            },
        ]
    };
    Choice {
        label: if mode == now {
            format!("{} (now)", mode.word())
        } else {
            mode.word().to_string()
        },
        detail,
        role: if approves > 0 && mode != now {
            Role::Warn
        } else {
            Role::Text
        },
        then,
    }
}

fn revoke_choices(cx: &Ctx) -> Vec<Choice> {
    let standing = &cx.state.standing;
    let revoke = |kind: Option<GateKind>, label: String, detail: String| {
        let what = kind.map_or_else(
            || format!("every approval ({})", kinds_text(standing)),
            |k| format!("the approval of all {}", k.plural()),
        );
        Choice {
            label,
            detail,
            role: Role::Text,
            then: vec![
                AppEvent::Close,
                AppEvent::Send {
                    command: Command::RevokeApprovals { kind },
                    done: format!("taking back {what}"),
                },
            ],
        }
    };
    let mut out = Vec::new();
    if standing.len() > 1 {
        out.push(revoke(
            None,
            "all".into(),
            format!("{}: each as below", kinds_text(standing)),
        ));
    }
    for kind in standing {
        out.push(revoke(
            Some(*kind),
            kind.plural().to_string(),
            after_revoke(cx.state.mode, *kind),
        ));
    }
    out
}

impl Component for ChoiceView {
    fn context(&self) -> Option<Context> {
        Some(Context::Confirm)
    }

    fn hints(&self, _cx: &Ctx, out: &mut Vec<Hint>) {
        out.extend([
            Hint::new(Action::Down, "move"),
            Hint::new(Action::Yes, "choose"),
            Hint::new(Action::No, "cancel"),
        ]);
    }

    /// Its own keys and the moves; any other key does nothing (it is modal).
    fn on_key(
        &mut self,
        key: &crossterm::event::KeyEvent,
        cx: &Ctx,
        out: &mut AppEvents,
    ) -> Handled {
        if let Some(action) = cx.keymap.lookup(key, &[Context::Confirm, Context::Global]) {
            let _ = self.on_action(action, cx, out);
        }
        Handled::Consumed
    }

    fn on_action(&mut self, action: Action, cx: &Ctx, out: &mut AppEvents) -> Handled {
        let choices = self.choices(cx);
        match action {
            Action::Yes => match choices.into_iter().nth(self.at) {
                Some(choice) => choice.then.into_iter().for_each(|e| out.push(e)),
                None => {
                    out.push(AppEvent::Close);
                    out.flash("no approval to take back");
                }
            },
            Action::No => out.push(AppEvent::Close),
            other => match scrolled(other, self.at, choices.len()) {
                Some(at) => self.at = at.min(choices.len().saturating_sub(1)),
                None => return Handled::Ignored,
            },
        }
        Handled::Consumed
    }

    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect) {
        let width = area.width.saturating_sub(4).min(80);
        let inner_w = width.saturating_sub(2) as usize;
        let choices = self.choices(cx);
        self.at = self.at.min(choices.len().saturating_sub(1));
        let label_w = choices
            .iter()
            .map(|c| c.label.chars().count())
            .max()
            .unwrap_or(0);
        let mut lines: Vec<Line> = wrap(&self.intro(cx), inner_w)
            .into_iter()
            .map(|l| Line::styled(l, cx.theme.get(Role::Muted)))
            .collect();
        lines.push(Line::from(""));
        if choices.is_empty() {
            lines.push(Line::styled(
                "no approval to take back",
                cx.theme.get(Role::Muted),
            ));
        }
        // `> label  what it does`, the detail wrapped under itself.
        let indent = label_w + 4;
        for (i, c) in choices.iter().enumerate() {
            let selected = i == self.at;
            let detail = wrap(&c.detail, inner_w.saturating_sub(indent).max(8));
            for (k, row) in detail.into_iter().enumerate() {
                let head = if k > 0 {
                    " ".repeat(indent)
                } else {
                    format!(
                        "{} {:<label_w$}  ",
                        if selected { ">" } else { " " },
                        c.label
                    )
                };
                let mut line = Line::from(vec![
                    Span::styled(head, cx.theme.get(Role::Accent)),
                    Span::styled(row, cx.theme.get(c.role)),
                ]);
                if selected {
                    line = line.patch_style(cx.theme.get(Role::Selection));
                }
                lines.push(line);
            }
        }
        lines.push(Line::from(""));
        let key = |a: Action| format!("[{}]", cx.keymap.hint(a));
        lines.push(Line::from(vec![
            Span::styled(key(Action::Yes), cx.theme.get(Role::StatusKey)),
            Span::styled(" choose   ", cx.theme.get(Role::Text)),
            Span::styled(key(Action::No), cx.theme.get(Role::StatusKey)),
            Span::styled(" cancel   ", cx.theme.get(Role::Text)),
            Span::styled(
                format!(
                    "{}/{} move",
                    cx.keymap.hint(Action::Down),
                    cx.keymap.hint(Action::Up)
                ),
                cx.theme.get(Role::Muted),
            ),
        ]));
        let r = centered(area, width, lines.len() as u16 + 2);
        frame.render_widget(Clear, r);
        let block = dialog(cx, self.title(cx));
        let inner = block.inner(r);
        frame.render_widget(block, r);
        frame.render_widget(Paragraph::new(lines), inner);
    }
}
