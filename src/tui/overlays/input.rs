//! Inline input: an instruction, a pane's filter, a search, or a whole prompt or kernel
//! (multi-line, line numbers, a kernel syntax highlighted). The view follows the cursor
//! without pinning it to an edge.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::InputView;
use crate::tui::component::{AppEvent, AppEvents, Component, Ctx, Handled, Hint};
use crate::tui::keymap::Action;
use crate::tui::shared::EditPurpose;
use crate::tui::theme::Role;
use crate::tui::widgets::{centered, dialog, plain, skip_cols};

impl InputView {
    /// The lines to draw for buffer lines `start..start+height`, highlighted where known.
    fn lines(
        &mut self,
        cx: &Ctx,
        start: usize,
        height: usize,
        hstart: usize,
    ) -> Vec<Line<'static>> {
        if self.python {
            let text: Arc<str> = Arc::from(self.text.text());
            if let Some(hl) = cx.highlighter.get(&text, cx.theme.syntax.as_deref()) {
                self.last_highlight = Some(hl);
            }
        }
        let hl = self.last_highlight.as_deref();
        self.text
            .lines
            .iter()
            .enumerate()
            .skip(start)
            .take(height)
            .map(|(i, l)| {
                // The cursor counts the buffer's own characters: a line whose highlighted
                // text differs from it (a tab expanded) is drawn as it is.
                let line = match hl.and_then(|h| h.get(i)) {
                    Some(h) if plain(h) == *l => h.clone(),
                    _ => Line::styled(l.clone(), cx.theme.get(Role::Text)),
                };
                skip_cols(line, hstart)
            })
            .collect()
    }
}

/// The narrowest a filter's or a search's box is drawn, whatever its pane's width.
const MIN_ANCHORED_WIDTH: u16 = 56;

impl Component for InputView {
    fn hints(&self, _cx: &Ctx, out: &mut Vec<Hint>) {
        // Its keys are fixed (typing takes every other key): said in its title.
        let _ = out;
    }

    fn on_action(&mut self, _action: Action, _cx: &Ctx, _out: &mut AppEvents) -> Handled {
        Handled::Consumed
    }

    fn on_key(&mut self, key: &KeyEvent, _cx: &Ctx, out: &mut AppEvents) -> Handled {
        let submit = match key.code {
            KeyCode::Esc => {
                if let EditPurpose::Filter(pane) = self.purpose {
                    out.push(AppEvent::Filter {
                        pane,
                        text: String::new(),
                    });
                }
                out.push(AppEvent::Close);
                return Handled::Consumed;
            }
            KeyCode::Enter if !self.multiline => true,
            KeyCode::Char('s') if key.modifiers.contains(KeyModifiers::CONTROL) => true,
            KeyCode::Enter if key.modifiers.contains(KeyModifiers::ALT) => true,
            _ => false,
        };
        if submit {
            out.push(AppEvent::Close);
            out.push(AppEvent::Submit {
                purpose: self.purpose.clone(),
                text: self.text.text(),
            });
            return Handled::Consumed;
        }
        self.text.key(*key, self.multiline);
        if let EditPurpose::Filter(pane) = self.purpose {
            out.push(AppEvent::Filter {
                pane,
                text: self.text.text(),
            });
        }
        Handled::Consumed
    }

    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect) {
        let h = if self.multiline {
            area.height.saturating_sub(6).max(6)
        } else {
            3
        };
        // Over the last lines of the pane it acts on, wide enough for its title (a narrow
        // pane's box reaches over its neighbour), within the screen.
        let r = match self.anchor {
            Some(c) => {
                let width = c.width.max(MIN_ANCHORED_WIDTH).min(area.width);
                let x = c.x.min(area.x + area.width - width);
                Rect::new(
                    x,
                    (c.y + c.height).saturating_sub(3),
                    width,
                    3.min(c.height),
                )
            }
            None => centered(area, area.width.saturating_sub(8).min(100), h),
        };
        frame.render_widget(Clear, r);
        let block = dialog(cx, format!(" {} ", self.title));
        let inner = block.inner(r);
        frame.render_widget(block, r);
        let ih = inner.height as usize;
        let start = self.text.scroll_to_cursor(ih);
        // Multi-line edits get line numbers.
        let gutter = if self.multiline {
            self.text.lines.len().to_string().len() + 1
        } else {
            0
        };
        let iw = (inner.width as usize).saturating_sub(gutter);
        let hstart = self.text.col.saturating_sub(iw.saturating_sub(1));
        let body = self.lines(cx, start, ih, hstart);
        let lines: Vec<Line> = body
            .into_iter()
            .enumerate()
            .map(|(k, l)| {
                let mut spans = Vec::new();
                if gutter > 0 {
                    spans.push(Span::styled(
                        format!("{:>w$} ", start + k + 1, w = gutter - 1),
                        cx.theme.get(Role::LineNumber),
                    ));
                }
                spans.extend(l.spans);
                Line::from(spans)
            })
            .collect();
        frame.render_widget(Paragraph::new(lines).style(cx.theme.get(Role::Text)), inner);
        frame.set_cursor_position(Position::new(
            inner.x + (gutter + self.text.col - hstart) as u16,
            inner.y + (self.text.row - start) as u16,
        ));
    }
}
