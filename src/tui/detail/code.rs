//! The Code tab: the selected candidate's kernel, highlighted, with line numbers.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::widgets::Paragraph;

use super::{ScrollView, TabView};
use crate::tui::component::Ctx;
use crate::tui::theme::Role;
use crate::tui::widgets::{code_lines, numbered};

#[derive(Debug, Default)]
pub struct CodeTab;

/// Says a file is being read or is not there (yet).
pub fn absent(cx: &Ctx, frame: &mut Frame, area: Rect, file: &str) {
    let text = if cx.docs.loading(file) {
        format!("loading {file}…")
    } else {
        format!("{file} is not there (yet)")
    };
    frame.render_widget(Paragraph::new(text).style(cx.theme.get(Role::Muted)), area);
}

impl TabView for CodeTab {
    fn draw(&mut self, cx: &Ctx, frame: &mut Frame, area: Rect, view: &mut ScrollView) {
        let Some(c) = cx.selected_candidate() else {
            return;
        };
        let Some(text) = cx.docs.text(&c.file) else {
            absent(cx, frame, area, &c.file);
            return;
        };
        let lines = code_lines(cx, &text);
        view.record(&lines);
        let h = area.height as usize;
        let start = view.clamp(lines.len(), h);
        let out = numbered(cx, &lines, start, h, view.hscroll, |l| view.marked(cx, l));
        frame.render_widget(Paragraph::new(out), area);
    }
}
