//! The console: the session's log lines (100k of them stay cheap: only the visible ones
//! are turned into lines), following the tail, with a live filter.

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::protocol::LogLevel;

use crate::tui::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint, inside};
use crate::tui::glyphs::Glyph;
use crate::tui::keymap::{Action, Context};
use crate::tui::overlays::{InputView, Overlay};
use crate::tui::shared::Focus;
use crate::tui::theme::Role;
use crate::tui::widgets::{filtered, pane_block};

#[derive(Debug, Default)]
pub struct ConsolePane {
    filter: String,
    /// Lines from the bottom; 0 follows the tail.
    offset: usize,
    /// Indices into the log of the lines that pass the filter.
    index: Vec<usize>,
    /// Where it was last drawn (the mouse, the filter's input line).
    pub area: Rect,
}

impl ConsolePane {
    pub fn new(cx: &Ctx) -> ConsolePane {
        let mut c = ConsolePane::default();
        c.rebuild(cx);
        c
    }

    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// Indices into the log of the lines that pass the filter.
    pub fn lines(&self) -> &[usize] {
        &self.index
    }

    /// Log lines `from..` were appended.
    pub fn appended(&mut self, cx: &Ctx, from: usize) {
        for i in from..cx.state.log.len() {
            if self.matches(cx, i) {
                self.index.push(i);
                if self.offset > 0 {
                    self.offset += 1;
                }
            }
        }
    }

    pub fn set_filter(&mut self, cx: &Ctx, filter: String) {
        if filter != self.filter {
            self.filter = filter;
            self.offset = 0;
            self.rebuild(cx);
        }
    }

    /// Back to the tail.
    pub fn follow_tail(&mut self) {
        self.offset = 0;
    }

    fn matches(&self, cx: &Ctx, i: usize) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let line = &cx.state.log[i];
        let f = self.filter.to_lowercase();
        line.tag.to_lowercase().contains(&f) || line.message.to_lowercase().contains(&f)
    }

    fn rebuild(&mut self, cx: &Ctx) {
        self.index = (0..cx.state.log.len())
            .filter(|i| self.matches(cx, *i))
            .collect();
    }

    /// The largest offset: scrolled to the top shows the first page.
    fn max_offset(&self) -> usize {
        self.index
            .len()
            .saturating_sub(self.area.height.saturating_sub(2) as usize)
    }

    fn move_by(&mut self, delta: isize) {
        let max = self.max_offset();
        self.offset = (self.offset.min(max) as isize - delta).clamp(0, max as isize) as usize;
    }

    /// The filter's input, drawn over the console's last lines.
    pub fn filter_input(&self) -> Overlay {
        Overlay::Input(InputView::filter(
            Focus::Console,
            "filter the console (enter keeps, esc clears)",
            &self.filter,
        ))
    }
}

impl Component for ConsolePane {
    fn context(&self) -> Option<Context> {
        Some(Context::Console)
    }

    fn hints(&self, _cx: &Ctx, out: &mut Vec<Hint>) {
        out.extend([
            Hint::new(Action::Down, "scroll"),
            Hint::new(Action::Filter, "filter"),
        ]);
    }

    fn on_action(&mut self, action: Action, cx: &Ctx, out: &mut AppEvents) -> Handled {
        match action {
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.move_by(-10),
            Action::PageDown => self.move_by(10),
            Action::Top => self.offset = self.max_offset(),
            Action::Bottom => self.offset = 0,
            Action::Filter => out.push(AppEvent::Open(self.filter_input())),
            // Nothing to clear here: the app says which filters are on.
            Action::ClearFilter if self.filter.is_empty() => return Handled::Ignored,
            Action::ClearFilter => {
                self.set_filter(cx, String::new());
                out.flash(format!(
                    "console filter cleared: all {} lines shown",
                    cx.state.log.len()
                ));
            }
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    fn on_mouse(&mut self, m: &MouseEvent, _cx: &Ctx, out: &mut AppEvents) -> Handled {
        if !inside(m, self.area) {
            return Handled::Ignored;
        }
        match m.kind {
            MouseEventKind::ScrollDown => self.move_by(3),
            MouseEventKind::ScrollUp => self.move_by(-3),
            MouseEventKind::Down(MouseButton::Left) => out.push(AppEvent::Focus(Focus::Console)),
            _ => return Handled::Ignored,
        }
        Handled::Consumed
    }

    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect) {
        self.area = area;
        let total = cx.state.log.len();
        let shown = self.index.len();
        let mut title = if self.filter.is_empty() {
            format!(" Console {shown}")
        } else {
            format!(" Console {}", filtered(shown, total, &self.filter))
        };
        title.push_str(&if self.offset == 0 {
            format!("  {} ", Glyph::Following.text())
        } else {
            "  (scrolled) ".to_string()
        });
        let block = pane_block(cx, title, Focus::Console);
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let h = inner.height as usize;
        let idx = &self.index;
        // Scrolled to the top at most: the first page.
        let offset = self.offset.min(idx.len().saturating_sub(h));
        let end = idx.len() - offset;
        let start = end.saturating_sub(h);
        let mut lines = Vec::with_capacity(h);
        for &i in &idx[start..end] {
            let l = &cx.state.log[i];
            let (lvl, role) = match l.level {
                LogLevel::Info => (" ", Role::LogInfo),
                LogLevel::Warn => (Glyph::Warning.text(), Role::LogWarn),
                LogLevel::Error => (Glyph::Failed.text(), Role::LogError),
            };
            lines.push(Line::from(vec![
                Span::styled(
                    l.ts.format("%H:%M:%S ").to_string(),
                    cx.theme.get(Role::LogTime),
                ),
                Span::styled(lvl, cx.theme.get(role)),
                Span::styled(format!(" [{}] ", l.tag), cx.theme.get(Role::LogTag)),
                Span::styled(l.message.clone(), cx.theme.get(role)),
            ]));
        }
        frame.render_widget(Paragraph::new(lines), inner);
    }
}
