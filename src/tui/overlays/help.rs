//! The help dialog: every bound key, generated from the live keymap, and the legend of the
//! glyphs, generated from the glyph table. The session view's lists every action and
//! glyph; the batch view's only those it answers and draws (`HelpView::for_actions`).

use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::HelpView;
use crate::tui::component::{AppEvent, AppEvents, Component, Handled, Hint, Look};
use crate::tui::glyphs::Glyph;
use crate::tui::keymap::{Action, Context, scrolled};
use crate::tui::theme::Role;
use crate::tui::widgets::{centered, dialog, wrap};

impl<C: Look> Component<C> for HelpView {
    fn hints(&self, _cx: &C, out: &mut Vec<Hint>) {
        out.push(Hint::new(Action::Down, "scroll"));
    }

    fn on_action(&mut self, action: Action, _cx: &C, out: &mut AppEvents) -> Handled {
        match scrolled(action, self.scroll, 10) {
            Some(s) => self.scroll = s,
            // Any other key closes it.
            None => out.push(AppEvent::Close),
        }
        Handled::Consumed
    }

    fn on_key(&mut self, key: &KeyEvent, cx: &C, out: &mut AppEvents) -> Handled {
        match cx.keymap().lookup(key, &[Context::Global]) {
            Some(action) => self.on_action(action, cx, out),
            None => {
                out.push(AppEvent::Close);
                Handled::Consumed
            }
        }
    }

    /// As wide as the terminal allows (up to a readable 110 columns), as tall as the
    /// screen; every description wraps at words under its own column, nothing is cut.
    fn draw(&mut self, cx: &C, frame: &mut Frame, area: Rect) {
        let theme = cx.theme();
        let r = centered(
            area,
            area.width.saturating_sub(4).min(110),
            area.height.saturating_sub(2),
        );
        frame.render_widget(Clear, r);
        let block = dialog(cx, " Keys (from your keymap) and glyphs — esc closes ");
        let inner = block.inner(r);
        frame.render_widget(block, r);
        let w = inner.width as usize;
        let sections = match self.only {
            Some(actions) => cx.keymap().help_for(actions),
            None => cx.keymap().help(),
        };
        // The session view's glyphs, or the batch view's: from the one table they draw.
        let glyphs: &[Glyph] = match self.only {
            Some(_) => &Glyph::BATCH,
            None => &Glyph::ALL,
        };
        let legend: Vec<(String, &str)> = glyphs
            .iter()
            .map(|g| (g.text().to_string(), g.meaning()))
            .collect();
        // The first column fits the longest keys (or glyph), within a third of the width.
        let first = sections
            .iter()
            .flat_map(|(_, entries)| entries.iter().map(|(k, _)| k.chars().count()))
            .chain(legend.iter().map(|(g, _)| g.chars().count()))
            .max()
            .unwrap_or(0)
            .clamp(6, (w / 3).max(6));
        let mut lines = Vec::new();
        let entry = |lines: &mut Vec<Line<'static>>, key: &str, text: &str| {
            let key_style = theme.get(Role::StatusKey);
            let text_style = theme.get(Role::Text);
            let room = w.saturating_sub(first + 4).max(12);
            let mut rows = wrap(text, room).into_iter();
            // Keys longer than the column get a row of their own.
            let head = if key.chars().count() > first {
                lines.push(Line::styled(format!("  {key}"), key_style));
                " ".repeat(first)
            } else {
                format!("{key:<first$}")
            };
            lines.push(Line::from(vec![
                Span::styled(format!("  {head}  "), key_style),
                Span::styled(rows.next().unwrap_or_default(), text_style),
            ]));
            for row in rows {
                lines.push(Line::from(vec![
                    Span::raw(" ".repeat(first + 4)),
                    Span::styled(row, text_style),
                ]));
            }
        };
        for (ctx, entries) in sections {
            if entries.is_empty() {
                continue;
            }
            lines.push(Line::styled(ctx.title(), theme.get(Role::Accent)));
            for (keys, desc) in entries {
                entry(&mut lines, &keys, desc);
            }
        }
        lines.push(Line::styled("Glyphs", theme.get(Role::Accent)));
        for (g, meaning) in &legend {
            entry(&mut lines, g, meaning);
        }
        lines.extend(
            wrap(
                "Keys are set in [tui.keys] of config.toml; see docs/tui.md.",
                w,
            )
            .into_iter()
            .map(|l| Line::styled(l, theme.get(Role::Muted))),
        );
        let h = inner.height as usize;
        self.scroll = self.scroll.min(lines.len().saturating_sub(h));
        let visible: Vec<Line> = lines.into_iter().skip(self.scroll).take(h).collect();
        frame.render_widget(Paragraph::new(visible), inner);
    }
}
