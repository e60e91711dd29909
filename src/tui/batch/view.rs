//! The task table: one row per task (key, status, best speedup, candidates, tokens, cost,
//! wall time, device), the selection, and enter to open the selected task's session.

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use crate::batch::results::TaskStatus;

use super::lines::{cost_cell, has_session, speedup_cell, status_role};
use super::{BatchCtx, KEYS};
use crate::protocol::figures::duration_text;
use crate::tui::component::{AppEvent, AppEvents, Component, Handled, Hint, inside};
use crate::tui::keymap::{Action, Context, scrolled};
use crate::tui::overlays::{HelpView, Overlay};
use crate::tui::shared::TuiExit;
use crate::tui::theme::Role;
use crate::tui::widgets::{fmt_tokens, truncate};

/// Widths of the columns after the key, and their titles (right-aligned but the status).
const COLUMNS: [(&str, usize); 7] = [
    ("status", 17),
    ("best", 8),
    ("cands", 5),
    ("tokens", 7),
    ("cost", 9),
    ("wall", 7),
    ("device", 8),
];

#[derive(Debug, Default)]
pub struct BatchView {
    selected: usize,
    /// The first task row shown (kept so the selection is in view when drawn).
    offset: usize,
    /// Task rows that fit, as last drawn (a page).
    page: usize,
    /// Where the task rows were last drawn (the mouse).
    rows: Rect,
}

impl BatchView {
    /// The selected task's index in the manifest.
    pub fn selected(&self) -> usize {
        self.selected
    }

    pub fn offset(&self) -> usize {
        self.offset
    }

    pub fn select(&mut self, i: usize, cx: &BatchCtx) {
        self.selected = i.min(cx.tasks().saturating_sub(1));
    }

    /// Enter: the selected task's session, or why there is none.
    fn open(&self, cx: &BatchCtx, out: &mut AppEvents) {
        let Some(task) = cx.manifest.tasks.get(self.selected) else {
            out.flash("the batch has no task");
            return;
        };
        let key = &task.key;
        match cx.result(self.selected) {
            None => out.flash(format!("{key}: still reading the batch, try again")),
            Some(r) if r.status == TaskStatus::Waiting => {
                out.flash(format!("{key} is waiting: it has no session yet"))
            }
            Some(r) if r.status == TaskStatus::Refused => out.flash(format!(
                "{key} was refused by the task check: {}",
                r.refused.as_deref().unwrap_or("no reason recorded")
            )),
            Some(_) => out.push(AppEvent::OpenTask(key.clone())),
        }
    }

    fn header_row(&self, cx: &BatchCtx, key_w: usize) -> Line<'static> {
        let mut text = format!(" {:<key_w$}", "task");
        for (i, (title, w)) in COLUMNS.iter().enumerate() {
            if i == 0 {
                text.push_str(&format!(" {title:<w$}"));
            } else {
                text.push_str(&format!(" {title:>w$}"));
            }
        }
        Line::styled(text, cx.theme.get(Role::Muted))
    }

    fn row(&self, cx: &BatchCtx, i: usize, key_w: usize) -> Line<'static> {
        let text = |role: Role| cx.theme.get(role);
        let task = &cx.manifest.tasks[i];
        let key = format!(" {:<key_w$}", truncate(task.key.as_str(), key_w));
        let mut spans = vec![Span::styled(key, text(Role::Text))];
        let cell = |s: String, w: usize| format!(" {:>w$}", truncate(&s, w));
        let [
            status_w,
            best_w,
            cands_w,
            tokens_w,
            cost_w,
            wall_w,
            device_w,
        ] = COLUMNS.map(|(_, w)| w);
        let Some(r) = cx.result(i) else {
            spans.push(Span::styled(
                format!(" {:<status_w$}", "loading …"),
                text(Role::Muted),
            ));
            return Line::from(spans);
        };
        spans.push(Span::styled(
            format!(" {:<status_w$}", truncate(r.status.word(), status_w)),
            text(status_role(r.status)),
        ));
        if !has_session(r) {
            return Line::from(spans);
        }
        let (best, best_role) = speedup_cell(r);
        spans.push(Span::styled(cell(best, best_w), text(best_role)));
        let device = r.device.clone().unwrap_or_else(|| "-".into());
        for (s, w) in [
            (r.candidates.to_string(), cands_w),
            (fmt_tokens(r.tokens()), tokens_w),
            (cost_cell(r), cost_w),
            (duration_text(r.wall_now(cx.now)), wall_w),
            (device, device_w),
        ] {
            spans.push(Span::styled(cell(s, w), text(Role::Text)));
        }
        Line::from(spans)
    }
}

impl Component<BatchCtx> for BatchView {
    fn context(&self) -> Option<Context> {
        Some(Context::Batch)
    }

    fn hints(&self, cx: &BatchCtx, out: &mut Vec<Hint>) {
        out.extend([
            Hint::new(Action::Help, "help"),
            Hint::new(Action::Quit, "quit"),
            Hint::new(Action::Down, "move"),
        ]);
        if cx.result(self.selected).is_some_and(has_session) {
            out.push(Hint::new(Action::OpenTask, "open the task's session"));
        }
    }

    fn on_action(&mut self, action: Action, cx: &BatchCtx, out: &mut AppEvents) -> Handled {
        if let Some(at) = scrolled(action, self.selected, self.page.max(1)) {
            self.select(at, cx);
            return Handled::Consumed;
        }
        match action {
            Action::OpenTask => self.open(cx, out),
            Action::Help => out.push(AppEvent::Open(Overlay::Help(HelpView::for_actions(KEYS)))),
            Action::Quit | Action::Interrupt => out.push(AppEvent::Quit(TuiExit::Quit)),
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    fn on_mouse(&mut self, m: &MouseEvent, cx: &BatchCtx, _out: &mut AppEvents) -> Handled {
        if !inside(m, self.rows) {
            return Handled::Ignored;
        }
        match m.kind {
            MouseEventKind::ScrollDown => self.select(self.selected + 3, cx),
            MouseEventKind::ScrollUp => self.select(self.selected.saturating_sub(3), cx),
            MouseEventKind::Down(MouseButton::Left) => {
                let row = (m.row - self.rows.y) as usize + self.offset;
                if row < cx.tasks() {
                    self.select(row, cx);
                }
            }
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    fn draw(&mut self, cx: &BatchCtx, frame: &mut Frame, area: Rect) {
        let n = cx.tasks();
        let focused = !cx.overlay_open;
        let block = Block::bordered()
            .border_style(cx.theme.get(if focused {
                Role::BorderFocus
            } else {
                Role::Border
            }))
            .title(format!(" Tasks {n} "))
            .title_style(cx.theme.get(if focused {
                Role::TitleFocus
            } else {
                Role::Title
            }));
        let inner = block.inner(area);
        frame.render_widget(block, area);
        if inner.height == 0 {
            return;
        }
        let key_w = cx
            .manifest
            .tasks
            .iter()
            .map(|t| t.key.as_str().chars().count())
            .max()
            .unwrap_or(0)
            .clamp(4, 32);
        let header = Rect::new(inner.x, inner.y, inner.width, 1);
        frame.render_widget(Paragraph::new(self.header_row(cx, key_w)), header);
        self.rows = Rect::new(
            inner.x,
            inner.y + 1,
            inner.width,
            inner.height.saturating_sub(1),
        );
        let height = self.rows.height as usize;
        self.page = height;
        self.selected = self.selected.min(n.saturating_sub(1));
        // The selection stays in view; no blank rows below the last task while they fit.
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if height > 0 && self.selected >= self.offset + height {
            self.offset = self.selected + 1 - height;
        }
        self.offset = self.offset.min(n.saturating_sub(height));
        let selection = cx.theme.get(Role::Selection);
        let lines: Vec<Line> = (self.offset..n)
            .take(height)
            .map(|i| {
                let line = self.row(cx, i, key_w);
                if i == self.selected {
                    // The bar spans the whole row.
                    let used: usize = line.spans.iter().map(|s| s.content.chars().count()).sum();
                    let mut spans = line.spans;
                    spans.push(Span::raw(
                        " ".repeat((inner.width as usize).saturating_sub(used)),
                    ));
                    Line::from(spans).style(selection)
                } else {
                    line.style(Style::default())
                }
            })
            .collect();
        frame.render_widget(Paragraph::new(lines), self.rows);
    }
}
