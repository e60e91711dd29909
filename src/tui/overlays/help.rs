//! The help dialog: every bound key, generated from the live keymap. The session view's
//! lists every action; the batch view's only those it answers (`HelpView::for_actions`).

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
use crate::tui::widgets::{centered, dialog};

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

    fn draw(&mut self, cx: &C, frame: &mut Frame, area: Rect) {
        let theme = cx.theme();
        let r = centered(area, 84, area.height.saturating_sub(4));
        frame.render_widget(Clear, r);
        let block = dialog(cx, " Keys (from your keymap) — esc closes ");
        let inner = block.inner(r);
        frame.render_widget(block, r);
        let mut lines = Vec::new();
        let sections = match self.only {
            Some(actions) => cx.keymap().help_for(actions),
            None => cx.keymap().help(),
        };
        for (ctx, entries) in sections {
            if entries.is_empty() {
                continue;
            }
            lines.push(Line::styled(ctx.title(), theme.get(Role::Accent)));
            for (keys, desc) in entries {
                lines.push(Line::from(vec![
                    Span::styled(format!("  {keys:<18}"), theme.get(Role::StatusKey)),
                    Span::styled(desc, theme.get(Role::Text)),
                ]));
            }
        }
        if self.only.is_none() {
            // The session view's glyphs, from the one vocabulary the panes draw.
            lines.push(Line::styled("Glyphs", theme.get(Role::Accent)));
            for g in Glyph::ALL {
                lines.push(Line::from(vec![
                    Span::styled(format!("  {:<18}", g.text()), theme.get(Role::StatusKey)),
                    Span::styled(g.meaning(), theme.get(Role::Text)),
                ]));
            }
        }
        lines.push(Line::styled(
            "Keys are set in [tui.keys] of config.toml; see docs/tui.md.",
            theme.get(Role::Muted),
        ));
        let h = inner.height as usize;
        self.scroll = self.scroll.min(lines.len().saturating_sub(h));
        let visible: Vec<Line> = lines.into_iter().skip(self.scroll).take(h).collect();
        frame.render_widget(Paragraph::new(visible), inner);
    }
}
